package server

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/resp"
)

// SET and DEL (change.Set): a Set replaces a key's total (DEL is a Set to
// 0), accepted like an increment: as a change in the journal before the
// reply, committed in order with the rounds. DEL reads its keys first for
// its reply; that read and the change are not atomic, so under
// concurrent increments the reply is advisory while the change itself is
// exact.

// setCommands are SET's and DEL's entries of the command table.
var setCommands = []*cmdSpec{
	{name: "del", arity: -2, flags: []string{"write"}, firstKey: 1, lastKey: -1, step: 1,
		keyFlags: []string{"RM", "DELETE"}, acl: []string{"@keyspace", "@write", "@slow"},
		group: "generic", since: "1.0.0", complexity: "O(N) where N is the number of keys",
		summary: "Zeroes counters: what is committed for them now and this daemon's pending increments are removed; replies how many were not 0.",
		run:     (*session).del, blocking: true, multi: multiQueued, queue: queueDel},
	{name: "set", arity: -3, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@string", "@slow"},
		group: "string", since: "1.0.0", complexity: "O(1)",
		summary: "Sets a counter to an integer, as DEL then INCRBY would; EX, PX, EXAT and PXAT set its expiry.",
		run:     (*session).set, blocking: true, multi: multiQueued, queue: queueSet},
}

// set answers SET key n [EX s | PX ms | EXAT t | PXAT t].
func (c *session) set(ctx context.Context, args [][]byte) error {
	s := c.s
	items, msg := parseSet(args, s.now())
	if msg != "" {
		c.fail(msg)
		return nil
	}
	if msg := s.acceptAll(ctx, items); msg != "" {
		c.out = resp.AppendError(c.out, msg)
		return nil
	}
	c.out = resp.AppendOK(c.out)
	return nil
}

// del answers DEL key...
func (c *session) del(ctx context.Context, args [][]byte) error {
	c.out = c.s.del(ctx, c.out, args[1:])
	return nil
}

func (s *Server) del(ctx context.Context, out []byte, keys [][]byte) []byte {
	names, msg := keyNames(keys)
	if msg != "" {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, msg)
	}
	est, msg := s.read(ctx, names)
	if msg != "" {
		return resp.AppendError(out, msg)
	}
	items := make([]change.Change, len(names))
	existed := int64(0)
	for i, k := range names {
		items[i] = change.Change{Key: k, Kind: change.Set}
		if exists(est[i]) {
			existed++
		}
	}
	if msg := s.acceptAll(ctx, items); msg != "" {
		return resp.AppendError(out, msg)
	}
	return resp.AppendInt(out, existed)
}

// parseSet parses SET key n [EX s | PX ms | EXAT t | PXAT t] into its
// changes: a Set, and an Expire when an option is given (an expiry
// already past makes it a DEL, as a key that expired at once). Redis's
// other options (NX, XX, GET, KEEPTTL) are refused by name; anything else
// is Redis's syntax error.
func parseSet(args [][]byte, now time.Time) ([]change.Change, string) {
	if err := checkKey(args[1]); err != nil {
		return nil, err.Error()
	}
	n, ok := resp.ParseInt(args[2])
	if !ok {
		return nil, errNotInt
	}
	items := []change.Change{{Key: string(args[1]), Kind: change.Set, Delta: n}}
	var unit string
	var t int64
	for i := 3; i < len(args); i++ {
		opt := string(bytes.ToUpper(args[i]))
		switch opt {
		case "NX", "XX", "GET", "KEEPTTL":
			return nil, fmt.Sprintf("ERR SET option %q is not supported by counterd (only EX, PX, EXAT and PXAT)", opt)
		case "EX", "PX", "EXAT", "PXAT":
			if unit != "" || i+1 == len(args) {
				return nil, "ERR syntax error"
			}
			i++
			if t, ok = resp.ParseInt(args[i]); !ok {
				return nil, errNotInt
			}
			unit = opt
		default:
			return nil, "ERR syntax error"
		}
	}
	if unit == "" {
		return items, ""
	}
	at, ok := expiryAt(unit, t, now)
	if t <= 0 || !ok {
		return nil, "ERR invalid expire time in 'set' command"
	}
	if at <= now.Unix() {
		items[0].Delta = 0
		return items, ""
	}
	return append(items, change.Change{Key: items[0].Key, Kind: change.Expire, Delta: at}), ""
}
