package server

import (
	"context"
	"fmt"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/resp"
	"github.com/counterd/counterd/internal/windows"
)

// maxVisitorLen bounds INCRONCE's visitor argument: it is hashed, never
// stored, but a visitor is an id or an address, not a document.
const maxVisitorLen = 1024

// onceCommand is INCRONCE key visitor window: one view of key by
// visitor, counted (1 added to key's total) unless the visitor's last
// counted view of key is less than window before it. The decision is
// the store's, at commit (change.Once); the reply says the view is
// journaled.
var onceCommand = &cmdSpec{
	name: "incronce", arity: 4, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 1, step: 1,
	keyFlags: []string{"RW", "UPDATE"}, acl: []string{"@write", "@string", "@slow"},
	group: "counterd", since: "1.0.0", complexity: "O(1)",
	summary: "Counts a view of a counter once per visitor per window (sliding from the visitor's last counted view); replies 1 once the view is accepted, counted at commit if new.",
	run:     (*session).incronce, fast: (*session).incronceFast, blocking: true,
	refusal: "ERR INCRONCE is not supported inside MULTI: send it outside the transaction",
}

// incronceFast adds a well-formed INCRONCE to the session's group, as the
// increments' fast path does, and reports whether it did: a pipeline's
// views are then one journal append with its increments, on the event
// loop, where the slow path journaled each view on its own from a
// goroutine (about 19 µs of counterd's CPU a view). The view's Delta, 1,
// is its reply. Anything malformed is left to incronce, which says why.
func (c *session) incronceFast(spec *cmdSpec, args [][]byte) bool {
	if len(args) != spec.arity {
		return false
	}
	item, msg := parseOnce(args, c.s.buf.Now())
	if msg != "" {
		return false
	}
	c.conn.lastCmd.Store(spec)
	c.group = append(c.group, item)
	return true
}

// incronce answers INCRONCE key visitor window.
func (c *session) incronce(ctx context.Context, args [][]byte) error {
	s := c.s
	item, msg := parseOnce(args, s.buf.Now())
	if msg != "" {
		c.fail(msg)
		return nil
	}
	if msg := s.acceptAll(ctx, []change.Change{item}); msg != "" {
		c.out = resp.AppendError(c.out, msg)
		return nil
	}
	c.out = resp.AppendInt(c.out, 1)
	return nil
}

// parseOnce parses INCRONCE's arguments into the view's change, accepted
// at at.
func parseOnce(args [][]byte, at time.Time) (change.Change, string) {
	if err := checkKey(args[1]); err != nil {
		return change.Change{}, err.Error()
	}
	visitor := args[2]
	if len(visitor) == 0 || len(visitor) > maxVisitorLen {
		return change.Change{}, fmt.Sprintf("ERR INCRONCE visitor must be 1..%d bytes", maxVisitorLen)
	}
	w, err := windows.ParseDuration(string(args[3]))
	if err != nil {
		return change.Change{}, "ERR invalid window: " + err.Error()
	}
	if w < time.Microsecond || w > change.MaxOnceWindow {
		return change.Change{}, fmt.Sprintf("ERR invalid window: %q is not within 1µs..%s", args[3], windows.FormatDuration(change.MaxOnceWindow))
	}
	return change.OnceView(string(args[1]), change.VisitorHash(visitor), at, w), ""
}
