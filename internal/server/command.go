package server

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"unsafe"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hotness"
	"github.com/counterd/counterd/internal/resp"
)

const errNotInt = "ERR value is not an integer or out of range"

// exec runs one command: an increment joins the session's group; any
// other command first ends the group, then appends its reply. Inside
// MULTI every command is queued instead (multi.go). A non-nil
// error ends the connection after the replies are written.
func (c *session) exec(ctx context.Context, args [][]byte) error {
	c.s.m.commands.Inc()
	if !c.conn.needAuth && c.tx == nil && (c.incr(args) || c.take(args)) {
		return nil
	}
	c.endGroup(ctx)
	if !c.conn.needAuth && c.transaction(ctx, args) {
		return nil
	}
	if c.connCommand(args) {
		return nil
	}
	var err error
	c.out, err = c.s.exec(ctx, c.out, args)
	return err
}

// incr adds a well-formed increment command to the group and reports
// whether it did; anything else, including errors, is left to exec.
func (c *session) incr(args [][]byte) bool {
	name := args[0]
	var d int64
	var spec *cmdSpec
	switch {
	case len(args) == 2 && is(name, "INCR"):
		d, spec = 1, cmdIncr
	case len(args) == 2 && is(name, "DECR"):
		d, spec = -1, cmdDecr
	case len(args) == 3 && is(name, "INCRBY"):
		n, ok := resp.ParseInt(args[2])
		if !ok {
			return false
		}
		d, spec = n, cmdIncrBy
	case len(args) == 3 && is(name, "DECRBY"):
		n, ok := resp.ParseInt(args[2])
		if !ok || n == math.MinInt64 {
			return false
		}
		d, spec = -n, cmdDecrBy
	default:
		return false
	}
	if checkKey(args[1]) != nil {
		return false
	}
	c.conn.lastCmd.Store(spec)
	c.group = append(c.group, c.s.sample(args[1], d))
	return true
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
	it := change.Change{Key: unsafe.String(unsafe.SliceData(key), len(key)), Kind: change.Total, Delta: d}
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

// exec runs a command that is not a well-formed increment and appends its
// reply to out.
func (s *Server) exec(ctx context.Context, out []byte, args [][]byte) ([]byte, error) {
	name := args[0]
	switch {
	case is(name, "INCR"), is(name, "DECR"):
		if len(args) != 2 {
			return wrongArity(out, name), nil
		}
		return s.badIncr(out, args[1]), nil
	case is(name, "INCRBY"), is(name, "DECRBY"):
		if len(args) != 3 {
			return wrongArity(out, name), nil
		}
		d, ok := resp.ParseInt(args[2])
		if !ok {
			s.m.commandErrors.Inc()
			return resp.AppendError(out, errNotInt), nil
		}
		if is(name, "DECRBY") && d == math.MinInt64 { // it has no negation
			s.m.commandErrors.Inc()
			return resp.AppendError(out, "ERR decrement would overflow"), nil
		}
		return s.badIncr(out, args[1]), nil
	case is(name, "GET"):
		if len(args) != 2 {
			return wrongArity(out, name), nil
		}
		return s.get(ctx, out, args[1:], false), nil
	case is(name, "MGET"):
		if len(args) < 2 {
			return wrongArity(out, name), nil
		}
		return s.get(ctx, out, args[1:], true), nil
	case is(name, "COUNT"):
		if len(args) < 2 {
			return wrongArity(out, name), nil
		}
		return s.countCmd(ctx, out, args), nil
	case is(name, "RANGE"):
		if len(args) != 4 {
			return wrongArity(out, name), nil
		}
		return s.rangeCmd(ctx, out, args), nil
	case is(name, "TOP"):
		if len(args) != 5 {
			return wrongArity(out, name), nil
		}
		return s.top(ctx, out, args), nil
	case is(name, "HOT"):
		if len(args) != 1 {
			return wrongArity(out, name), nil
		}
		return s.hot(out), nil
	case is(name, "FLUSH"):
		if len(args) != 1 {
			return wrongArity(out, name), nil
		}
		return s.flush(ctx, out), nil
	case is(name, "PING"):
		switch len(args) {
		case 1:
			return resp.AppendSimple(out, "PONG"), nil
		case 2:
			return resp.AppendBulk(out, args[1]), nil
		}
		return wrongArity(out, name), nil
	case is(name, "QUIT"):
		return resp.AppendOK(out), errQuit
	}
	if out, ok := s.budgetCommand(ctx, out, args); ok {
		return out, nil
	}
	if out, ok := s.resetCommand(ctx, out, args); ok {
		return out, nil
	}
	// Connection and admin commands (HELLO, CLIENT, COMMAND, INFO...) are
	// answered by session.connCommand, which also refuses unknown names
	// before they reach here.
	s.m.commandErrors.Inc()
	return resp.AppendError(out, unknown(args)), nil
}

// badIncr answers an increment that session.incr refused for its key.
func (s *Server) badIncr(out, key []byte) []byte {
	s.m.commandErrors.Inc()
	if err := checkKey(key); err != nil {
		return resp.AppendError(out, err.Error())
	}
	return resp.AppendError(out, "ERR BUG: increment refused without a reason")
}

func (s *Server) get(ctx context.Context, out []byte, keys [][]byte, array bool) []byte {
	names := make([]string, len(keys))
	for i, k := range keys {
		if err := checkKey(k); err != nil {
			s.m.commandErrors.Inc()
			return resp.AppendError(out, err.Error())
		}
		names[i] = string(k)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	est, err := s.buf.Estimates(ctx, names)
	if err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, fmt.Sprintf("ERR read totals: %v", err))
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
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	est, err := s.buf.Estimates(ctx, []string{string(key)})
	if err == nil {
		err = est[0].Overflow
	}
	if err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, fmt.Sprintf("ERR read totals: %v", err))
	}
	return appendCount(out, est[0])
}

// hot answers HOT: the hot keys, hottest first, each as [key, rate per
// second, N].
func (s *Server) hot(out []byte) []byte {
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

func (s *Server) flush(ctx context.Context, out []byte) []byte {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	if err := s.buf.Flush(ctx); err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, fmt.Sprintf("ERR flush not confirmed within %s; increments are kept and retried: %v", s.opts.Timeout, err))
	}
	return resp.AppendOK(out)
}

func is(name []byte, cmd string) bool {
	return len(name) == len(cmd) && bytes.EqualFold(name, []byte(cmd))
}

func wrongArity(out, name []byte) []byte {
	return resp.AppendError(out, "ERR wrong number of arguments for '"+string(bytes.ToLower(name))+"' command")
}

// unknown words the error as Redis does, quoting at most a few arguments.
func unknown(args [][]byte) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "ERR unknown command '%s', with args beginning with:", clip(args[0]))
	for i, a := range args[1:] {
		if i == 3 {
			break
		}
		fmt.Fprintf(&b, " '%s'", clip(a))
	}
	return b.String()
}

func clip(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}
