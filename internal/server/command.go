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

// parse describes an increment: its change, replied with its amount as
// sampled. The fast path takes a well-formed one; this answers one it
// refused, and one queued inside MULTI.
func (d deltaFunc) parse(args [][]byte, _ time.Time) (call, string) {
	n, msg := d(args)
	if msg != "" {
		return call{}, msg
	}
	if err := checkKey(args[1]); err != nil {
		return call{}, err.Error()
	}
	return call{changes: []change.Change{{Key: string(args[1]), Kind: change.Plain(), Delta: n}}, reply: replyDelta}, ""
}

func replyDelta(_ *Server, out []byte, c call, _ []read) []byte {
	return resp.AppendInt(out, c.changes[0].Delta)
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

// parseGet describes GET key: the total as a bulk string.
func parseGet(args [][]byte, _ time.Time) (call, string) {
	names, msg := keyNames(args[1:])
	return call{reads: names, reply: replyGet}, msg
}

// parseMGet describes MGET key...: an array of totals.
func parseMGet(args [][]byte, _ time.Time) (call, string) {
	names, msg := keyNames(args[1:])
	return call{reads: names, reply: replyMGet}, msg
}

func replyGet(s *Server, out []byte, _ call, reads []read) []byte { return s.appendReads(out, reads) }

func replyMGet(s *Server, out []byte, _ call, reads []read) []byte {
	return s.appendReads(resp.AppendArrayHeader(out, len(reads)), reads)
}

// appendReads appends each read's total, or its error: a total beyond
// int64 is an error for that key only, MGET's element for it.
func (s *Server) appendReads(out []byte, reads []read) []byte {
	for _, r := range reads {
		if r.err != "" {
			s.m.commandErrors.Inc()
			out = resp.AppendError(out, r.err)
			continue
		}
		out = resp.AppendBulkInt(out, r.Total)
	}
	return out
}

// countAlone answers COUNT's other forms (windows.go), run only at once.
var countAlone = onServer((*Server).countCmd)

// parseCount describes COUNT key: [total, "exact" or "estimated",
// error95], where the true count lies within total ± error95 with about
// 95% probability. COUNT key SINCE span is run alone, refused inside
// MULTI: time window reads are not (yet) answered at a position in a
// transaction.
func parseCount(args [][]byte, _ time.Time) (call, string) {
	if len(args) > 2 {
		return call{alone: countAlone}, errWindowInMulti
	}
	if err := checkKey(args[1]); err != nil {
		return call{}, err.Error()
	}
	return call{reads: []string{string(args[1])}, reply: replyCount}, ""
}

func replyCount(s *Server, out []byte, _ call, reads []read) []byte {
	if r := reads[0]; r.err != "" {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, r.err)
	}
	return appendCount(out, reads[0].Estimate)
}

// appendCount appends COUNT's reply for e: [total, "exact" or
// "estimated", error95].
func appendCount(out []byte, e pending.Estimate) []byte {
	out = resp.AppendArrayHeader(out, 3)
	out = resp.AppendInt(out, e.Total)
	if e.Var == 0 {
		out = resp.AppendBulkString(out, "exact")
	} else {
		out = resp.AppendBulkString(out, "estimated")
	}
	return resp.AppendInt(out, hotness.Error95(e.Var))
}

// parseHot describes HOT.
func parseHot([][]byte, time.Time) (call, string) { return call{reply: replyHot}, "" }

func replyHot(s *Server, out []byte, _ call, _ []read) []byte { return s.appendHot(out) }

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

// errFlushInMulti refuses FLUSH inside MULTI.
const errFlushInMulti = "ERR FLUSH is not allowed inside MULTI: it waits on the database; send it after EXEC"

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
	return s.acceptError(err, errs)
}

// acceptError words why AddAll (err, with errs per item) or confirming it
// failed, for one command.
func (s *Server) acceptError(err error, errs []error) string {
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
