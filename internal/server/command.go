package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hotness"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

const errNotInt = "ERR value is not an integer or out of range"

// deltaFunc is an increment command's amount: fixed (INCR 1, DECR -1) or
// its argument (INCRBY n, DECRBY -n), or the error reply for an amount it
// cannot add. Its fast path, its handler and its queueing inside MULTI
// all derive from it (counter, in table.go).
type deltaFunc func(args [][]byte) (int64, string)

func fixedDelta(d int64) deltaFunc {
	return func([][]byte) (int64, string) { return d, "" }
}

// argDelta is sign times the call's third argument.
func argDelta(sign int64) deltaFunc {
	return func(args [][]byte) (int64, string) {
		n, ok := resp.ParseInt(args[2])
		switch {
		case !ok:
			return 0, errNotInt
		case sign < 0 && n == math.MinInt64: // it has no negation
			return 0, "ERR decrement would overflow"
		}
		return sign * n, ""
	}
}

// fast adds a well-formed increment to the group and reports whether it
// did; anything else, including errors, is left to run.
func (d deltaFunc) fast(c *session, spec *cmdSpec, args [][]byte) bool {
	if len(args) != spec.arity {
		return false
	}
	n, msg := d(args)
	if msg != "" || checkKey(args[1]) != nil {
		return false
	}
	c.conn.lastCmd.Store(spec)
	c.group = append(c.group, c.s.sample(args[1], n))
	return true
}

// run answers an increment the fast path refused: why it did.
func (d deltaFunc) run(c *session, _ context.Context, args [][]byte) error {
	if _, msg := d(args); msg != "" {
		c.fail(msg)
		return nil
	}
	if err := checkKey(args[1]); err != nil {
		c.fail(err.Error())
		return nil
	}
	c.fail("ERR BUG: increment refused without a reason")
	return nil
}

// queue checks an increment inside MULTI.
func (d deltaFunc) queue(args [][]byte, _ time.Time) (txCmd, [][]byte, string) {
	n, msg := d(args)
	return txCmd{effect: txIncr, delta: n, reply: replyIncr}, args[1:2], msg
}

// sample observes one increment event of weight d and, when its key is hot
// and matches Options.Sample, applies the probabilistic increment: INCRBY
// k d is one event of weight d, recorded as N·d with probability 1/N. A key
// that can never be sampled (no pattern matches, or none is set) is only
// tallied for HOT, which skips most calls at once; matching does not
// allocate.
func (s *Server) sample(key []byte, d int64) change.Change {
	// The key aliases the read buffer until the group ends: AddGroup
	// copies what it keeps.
	it := change.Change{Key: unsafe.String(unsafe.SliceData(key), len(key)), Kind: change.Plain(), Delta: d}
	if s.opts.Hot == nil {
		return it
	}
	if !s.opts.Sample.Match(it.Key) {
		s.opts.Hot.Tally(key)
		return it
	}
	n := s.opts.Hot.Observe(key)
	if n <= 1 {
		return it
	}
	it.Delta, it.Var = hotness.Sample(d, n, rand.Uint64())
	if it.Delta == 0 {
		s.m.sampledOut.Inc()
	} else {
		s.m.sampledRecorded.Inc()
	}
	return it
}

// getCmd answers GET key: the total as a bulk string.
func (c *session) getCmd(ctx context.Context, args [][]byte) error {
	c.out = c.s.get(ctx, c.out, args[1:], false)
	return nil
}

// mget answers MGET key...: an array of totals.
func (c *session) mget(ctx context.Context, args [][]byte) error {
	c.out = c.s.get(ctx, c.out, args[1:], true)
	return nil
}

func (s *Server) get(ctx context.Context, out []byte, keys [][]byte, array bool) []byte {
	names, msg := keyNames(keys)
	if msg != "" {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, msg)
	}
	est, msg := s.read(ctx, names)
	if msg != "" {
		return resp.AppendError(out, msg)
	}
	if array {
		out = resp.AppendArrayHeader(out, len(est))
	}
	// A total beyond int64 is an error for that key only: MGET's element
	// for it is the error reply, as a transaction's reads are.
	for _, e := range est {
		if e.Overflow != nil {
			s.m.commandErrors.Inc()
			out = resp.AppendError(out, fmt.Sprintf("ERR read totals: %v", e.Overflow))
			continue
		}
		out = resp.AppendBulkInt(out, e.Total)
	}
	return out
}

// count answers COUNT key: [total, "exact" or "estimated", error95], where
// the true count lies within total ± error95 with about 95% probability.
func (s *Server) count(ctx context.Context, out, key []byte) []byte {
	if err := checkKey(key); err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, err.Error())
	}
	est, msg := s.read(ctx, []string{string(key)})
	if msg != "" {
		return resp.AppendError(out, msg)
	}
	if est[0].Overflow != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, fmt.Sprintf("ERR read totals: %v", est[0].Overflow))
	}
	return appendCount(out, est[0])
}

// hot answers HOT.
func (c *session) hot(context.Context, [][]byte) error {
	c.out = c.s.appendHot(c.out)
	return nil
}

// appendHot appends HOT's reply: the hot keys, hottest first, each as
// [key, rate per second, N].
func (s *Server) appendHot(out []byte) []byte {
	if s.opts.Hot == nil {
		return resp.AppendArrayHeader(out, 0)
	}
	keys := s.opts.Hot.Hot()
	out = resp.AppendArrayHeader(out, len(keys))
	for _, k := range keys {
		n := k.N
		if !s.opts.Sample.Match(k.Key) {
			n = 1 // counted exactly
		}
		out = resp.AppendArrayHeader(out, 3)
		out = resp.AppendBulkString(out, k.Key)
		out = resp.AppendBulkString(out, strconv.FormatFloat(k.Rate, 'f', 1, 64))
		out = resp.AppendInt(out, int64(n))
	}
	return out
}

// flush answers FLUSH: OK once everything accepted before it is committed.
func (c *session) flush(ctx context.Context, _ [][]byte) error {
	s := c.s
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	if err := s.buf.Flush(ctx); err != nil {
		msg := fmt.Sprintf("ERR flush not confirmed within %s; increments are kept and retried: %v", s.opts.Timeout, err)
		if s.opts.Health != nil {
			// Why, which the deadline alone does not say (a partition
			// down, say).
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			if herr := s.opts.Health(hctx); herr != nil {
				msg += "; " + herr.Error()
			}
			cancel()
		}
		c.fail(strings.ReplaceAll(msg, "\n", " "))
		return nil
	}
	c.out = resp.AppendOK(c.out)
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
