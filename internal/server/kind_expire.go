package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/resp"
)

// Expiries (change.Expire): EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL,
// PTTL and PERSIST. Each is accepted like an increment: as a change in
// the journal before the reply, committed in order with the rounds. A key
// "exists" when its total, as GET reads it, is not 0: a counter at 0 and
// a key never counted are the same thing. EXPIRE, TTL and PERSIST read
// the key first for their reply (and EXPIRE and PERSIST do nothing to a
// key that does not exist); that read and the change are not atomic, so
// under concurrent increments the reply is advisory while the change
// itself is exact.

// expireCommands are the expiries' entries of the command table.
var expireCommands = []*cmdSpec{
	expireSpec("expire", "Sets a counter's expiry in seconds; replies 1, or 0 if the counter is 0."),
	expireSpec("pexpire", "Sets a counter's expiry in milliseconds (rounded up to whole seconds)."),
	expireSpec("expireat", "Sets a counter's expiry as a unix time in seconds."),
	expireSpec("pexpireat", "Sets a counter's expiry as a unix time in milliseconds (rounded up to whole seconds)."),
	ttlSpec("ttl", "Returns a counter's time to live in seconds: -1 without expiry, -2 if it is 0."),
	ttlSpec("pttl", "Returns a counter's time to live in milliseconds: -1 without expiry, -2 if it is 0."),
	{name: "persist", arity: 2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "UPDATE"}, acl: []string{"@keyspace", "@write", "@fast"},
		group: "generic", since: "2.2.0", complexity: "O(1)",
		summary: "Removes a counter's expiry; replies 1, or 0 if it had none.",
		run:     (*session).persist, blocking: true, refusal: notInMulti("persist")},
}

// notInMulti refuses a command inside MULTI, by name.
func notInMulti(name string) string {
	return "ERR " + strings.ToUpper(name) + " is not supported inside MULTI: send it outside the transaction"
}

// expire answers EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT.
func (c *session) expire(ctx context.Context, args [][]byte) error {
	c.out = c.s.expire(ctx, c.out, args)
	return nil
}

// ttl answers TTL and PTTL.
func (c *session) ttl(ctx context.Context, args [][]byte) error {
	c.out = c.s.ttl(ctx, c.out, args[1], is(args[0], "PTTL"))
	return nil
}

// persist answers PERSIST key.
func (c *session) persist(ctx context.Context, args [][]byte) error {
	c.out = c.s.persist(ctx, c.out, args[1])
	return nil
}

// expiryAt converts an expiry given to SET or the EXPIRE family into the
// unix second it is kept as, rounded up: a key never expires before the
// time asked, and at most 999 ms after it. It reports false for a time
// out of range.
func expiryAt(unit string, t int64, now time.Time) (int64, bool) {
	const maxSec = 1 << 40 // far beyond any date PostgreSQL's to_timestamp takes badly
	switch unit {
	case "EX", "EXPIRE":
		if t > maxSec || t < -maxSec {
			return 0, false
		}
		return ceilSec(now.UnixMilli() + t*1000), true
	case "PX", "PEXPIRE":
		if t > maxSec*1000 || t < -maxSec*1000 {
			return 0, false
		}
		return ceilSec(now.UnixMilli() + t), true
	case "EXAT", "EXPIREAT":
		return t, t <= maxSec && t >= -maxSec
	case "PXAT", "PEXPIREAT":
		return ceilSec(t), t <= maxSec*1000 && t >= -maxSec*1000
	}
	return 0, false
}

// ceilSec is the unix second at or after ms (unix milliseconds).
func ceilSec(ms int64) int64 {
	s := ms / 1000
	if ms%1000 > 0 {
		s++
	}
	return s
}

// expire answers EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT key t: 0 for a
// key that does not exist; else 1, having set the expiry, or deleted the
// key when the time is already past (as Redis does). Redis's NX, XX, GT
// and LT options are refused by name.
func (s *Server) expire(ctx context.Context, out []byte, args [][]byte) []byte {
	if err := checkKey(args[1]); err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, err.Error())
	}
	t, ok := resp.ParseInt(args[2])
	if !ok {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, errNotInt)
	}
	if len(args) > 3 {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, expireOptionError(args[0], args[3]))
	}
	now := s.now()
	at, ok := expiryAt(string(bytes.ToUpper(args[0])), t, now)
	if !ok {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, "ERR invalid expire time in '"+string(bytes.ToLower(args[0]))+"' command")
	}
	key := string(args[1])
	est, msg := s.read(ctx, []string{key})
	if msg != "" {
		return resp.AppendError(out, msg)
	}
	if !exists(est[0]) {
		return resp.AppendInt(out, 0)
	}
	item := change.Change{Key: key, Kind: change.Expire, Delta: at}
	if at <= now.Unix() {
		item = change.Change{Key: key, Kind: change.Set}
	}
	if msg := s.acceptAll(ctx, []change.Change{item}); msg != "" {
		return resp.AppendError(out, msg)
	}
	return resp.AppendInt(out, 1)
}

// expireOptionError refuses an option of the EXPIRE family: Redis's by
// name, anything else as Redis's unsupported option.
func expireOptionError(cmd, opt []byte) string {
	o := string(bytes.ToUpper(opt))
	switch o {
	case "NX", "XX", "GT", "LT":
		return fmt.Sprintf("ERR %s option %q is not supported by counterd (no options)", bytes.ToUpper(cmd), o)
	}
	return "ERR Unsupported option " + clip(opt)
}

// ttl answers TTL and PTTL: -2 for a key that does not exist, -1 for one
// without expiry, else the time left until the whole second the expiry is
// kept as: PTTL in milliseconds, TTL in whole seconds rounded down, so
// TTL right after EXPIRE k 10 reads 10, as in Redis.
func (s *Server) ttl(ctx context.Context, out, key []byte, ms bool) []byte {
	if err := checkKey(key); err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, err.Error())
	}
	est, msg := s.read(ctx, []string{string(key)})
	if msg != "" {
		return resp.AppendError(out, msg)
	}
	e := est[0]
	switch {
	case !exists(e):
		return resp.AppendInt(out, -2)
	case e.Expires == 0:
		return resp.AppendInt(out, -1)
	}
	left := max(e.Expires-s.now().UnixMilli(), 0)
	if ms {
		return resp.AppendInt(out, left)
	}
	return resp.AppendInt(out, left/1000)
}

// persist answers PERSIST key: 1 if it removed an expiry, else 0.
func (s *Server) persist(ctx context.Context, out, key []byte) []byte {
	if err := checkKey(key); err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, err.Error())
	}
	k := string(key)
	est, msg := s.read(ctx, []string{k})
	if msg != "" {
		return resp.AppendError(out, msg)
	}
	if !exists(est[0]) || est[0].Expires == 0 {
		return resp.AppendInt(out, 0)
	}
	if msg := s.acceptAll(ctx, []change.Change{{Key: k, Kind: change.Expire}}); msg != "" {
		return resp.AppendError(out, msg)
	}
	return resp.AppendInt(out, 1)
}

func expireSpec(name, summary string) *cmdSpec {
	// -3: Redis's options are taken, to be refused by name.
	return &cmdSpec{name: name, arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "UPDATE"}, acl: []string{"@keyspace", "@write", "@fast"},
		group: "generic", since: "1.0.0", complexity: "O(1)", summary: summary,
		run: (*session).expire, blocking: true, refusal: notInMulti(name)}
}

func ttlSpec(name, summary string) *cmdSpec {
	return &cmdSpec{name: name, arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO", "ACCESS"}, acl: []string{"@keyspace", "@read", "@fast"},
		group: "generic", since: "1.0.0", complexity: "O(1)", summary: summary,
		run: (*session).ttl, blocking: true, refusal: notInMulti(name)}
}
