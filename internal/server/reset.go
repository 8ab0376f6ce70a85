package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

// DEL, SET, EXPIRE and friends. Each is accepted like an increment: as a
// change in the journal before the reply (change.Set, change.Expire), and
// committed in order with the rounds. A key "exists" when its total, as
// GET reads it, is not 0: a counter at 0 and a key never counted are the
// same thing. DEL, EXPIRE, TTL and PERSIST read the key first for their
// reply (and EXPIRE and PERSIST do nothing to a key that does not exist);
// that read and the change are not atomic, so under concurrent increments
// the reply is advisory while the change itself is exact.

// notInMulti refuses a command of this file but DEL and SET inside MULTI.
func notInMulti(name string) string {
	return "ERR " + strings.ToUpper(name) + " is not supported inside MULTI: send it outside the transaction"
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

// now is the server's clock for expiry times.
func (s *Server) now() time.Time { return s.clock() }

// acceptAll accepts items as one journal record, all or none, and waits
// for what the acknowledgement mode promises; it returns the error reply,
// or "" once accepted.
func (s *Server) acceptAll(ctx context.Context, items []change.Change) string {
	errs := make([]error, len(items))
	tk, err := s.buf.AddAll(items, errs)
	if err == nil {
		err = s.confirm(ctx, tk)
	}
	if err == nil {
		return ""
	}
	s.m.commandErrors.Inc()
	if errors.Is(err, pending.ErrNotAll) {
		for _, e := range errs {
			if e != nil {
				return itemError(e)
			}
		}
	}
	return groupError(err)
}

// read returns keys' estimates as GET sees them, or the error reply.
func (s *Server) read(ctx context.Context, keys []string) ([]pending.Estimate, string) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	est, err := s.buf.Estimates(ctx, keys)
	if err != nil {
		s.m.commandErrors.Inc()
		return nil, fmt.Sprintf("ERR read totals: %v", err)
	}
	return est, ""
}

// exists reports whether a key exists: its total is not 0, which a
// total beyond int64 is not either.
func exists(e pending.Estimate) bool { return e.Total != 0 || e.Overflow != nil }

// keyNames checks keys and copies them.
func keyNames(keys [][]byte) ([]string, string) {
	names := make([]string, len(keys))
	for i, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, err.Error()
		}
		names[i] = string(k)
	}
	return names, ""
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
