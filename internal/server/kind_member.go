package server

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/resp"
)

// Exact sets (change.SetOp): SADD, SREM, SISMEMBER, SMISMEMBER and
// SCARD. A set's members are rows in PostgreSQL (counter_set_members);
// its cardinality is the key's total, so GET of the key reads it too.
//
// SADD and SREM journal one change per member, then wait for their
// round's commit, whatever COUNTERD_ACK says: whether a member was new
// is decided in the round's transaction, against every daemon's
// commits, and the reply is what that decided (pending.Buffer.Outcome).
// A reply therefore costs a round's commit (COUNTERD_FLUSH_INTERVAL plus
// the write; the commit waiter kicks the round, as FLUSH does). SADD and
// SREM of one member take the fast path: they join the connection's
// group, as INCRONCE does, and the group waits for its round's commit
// once (confirmGroup), so a pipeline's operations share one commit; each
// reply is its operation's outcome (setOpReply). Several members a
// command go the slow path, one commit wait per command.

// setMemberCommands are the exact sets' entries of the command table.
var setMemberCommands = []*cmdSpec{
	setOpCommand("sadd", true, "Adds members to an exact set, decided in PostgreSQL across every daemon; replies, once its round committed, the number of members that were new."),
	setOpCommand("srem", false, "Removes members from an exact set, decided in PostgreSQL across every daemon; replies, once its round committed, the number of members that were removed."),
	{name: "sismember", arity: 3, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO"}, acl: []string{"@read", "@set", "@fast"},
		group: "set", since: "1.0.0", complexity: "O(1)",
		summary: "Returns 1 if the member is in the exact set as stored in PostgreSQL (every SADD/SREM that replied is), else 0.",
		run:     onServer(setMembers(false)), blocking: true, refusal: notInMulti("sismember")},
	{name: "smismember", arity: -3, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO"}, acl: []string{"@read", "@set", "@fast"},
		group: "set", since: "6.2.0", complexity: "O(N) where N is the number of members",
		summary: "Returns, for each member, 1 if it is in the exact set as stored, else 0.",
		run:     onServer(setMembers(true)), blocking: true, refusal: notInMulti("smismember")},
	{name: "scard", arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO"}, acl: []string{"@read", "@set", "@fast"},
		group: "set", since: "1.0.0", complexity: "O(1)",
		summary: "Returns the exact set's cardinality: the key's total, as GET reads it.",
		run:     onServer((*Server).scard), blocking: true, refusal: notInMulti("scard")},
}

func setOpCommand(name string, add bool, summary string) *cmdSpec {
	keyFlags := []string{"RW", "DELETE"} // as Redis's SREM
	if add {
		keyFlags = []string{"RW", "INSERT"}
	}
	return &cmdSpec{name: name, arity: -3, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: keyFlags, acl: []string{"@write", "@set", "@slow"},
		group: "set", since: "1.0.0", complexity: "O(N) where N is the number of members",
		summary: summary, run: onServer(setOp(add)), fast: setOpFast(add), blocking: true, refusal: notInMulti(name),
		groupKind: change.SetOp, groupReply: (*Server).setOpReply}
}

// setOpFast adds SADD or SREM key member (one member) to the session's
// group and marks the group to wait for its round's commit. Anything else
// (several members, a bad key or member) is left to setOp, which says
// why.
func setOpFast(add bool) fastHandler {
	return func(c *session, spec *cmdSpec, args [][]byte) bool {
		if len(args) != 3 {
			return false
		}
		key, _, msg := parseSetArgs(args)
		if msg != "" {
			return false
		}
		c.conn.lastCmd.Store(spec)
		c.group = append(c.group, change.SetOpChange(key, args[2], nextSetToken(c.s.buf.Now().UnixMicro()), add))
		c.groupCommit = true
		return true
	}
}

// errNoOutcome is the reply of a set operation whose round committed
// without reporting its outcome to this daemon.
const errNoOutcome = "ERR set operation committed but its outcome was not reported (a round retried after its commit); read SISMEMBER"

// setOpReply is the reply of SADD or SREM key member, its group committed
// (confirmed): what its round decided, 1 or 0.
func (s *Server) setOpReply(it change.Change, confirmed bool) (int64, string) {
	if !confirmed {
		return 0, ""
	}
	o, ok := s.buf.Outcome(change.OpID(it))
	if !ok {
		return 0, errNoOutcome
	}
	return o, ""
}

// setTokens hands out SetOp tokens: unix microseconds, strictly
// increasing across every server of the process, so a daemon's
// operations never share a cell and their tokens are their accept order.
var setTokens atomic.Int64

func nextSetToken(now int64) int64 {
	for {
		last := setTokens.Load()
		t := max(now, last+1)
		if setTokens.CompareAndSwap(last, t) {
			return t
		}
	}
}

// parseSetArgs checks a set command's key and members.
func parseSetArgs(args [][]byte) (string, [][]byte, string) {
	if err := checkKey(args[1]); err != nil {
		return "", nil, err.Error()
	}
	for _, m := range args[2:] {
		if len(m) == 0 || len(m) > change.MaxMemberLen {
			return "", nil, fmt.Sprintf("ERR set member must be 1..%d bytes", change.MaxMemberLen)
		}
	}
	return string(args[1]), args[2:], ""
}

// setOp answers SADD (add) or SREM key member [member ...].
func setOp(add bool) func(s *Server, ctx context.Context, out []byte, args [][]byte) []byte {
	return func(s *Server, ctx context.Context, out []byte, args [][]byte) []byte {
		key, members, msg := parseSetArgs(args)
		if msg != "" {
			s.m.commandErrors.Inc()
			return resp.AppendError(out, msg)
		}
		now := s.buf.Now().UnixMicro()
		items := make([]change.Change, len(members))
		for i, m := range members {
			items[i] = change.SetOpChange(key, m, nextSetToken(now), add)
		}
		errs := make([]error, len(items))
		tk, err := s.buf.AddAll(items, errs)
		if err == nil {
			err = s.confirm(ctx, tk)
		}
		if err != nil {
			s.m.commandErrors.Inc()
			return resp.AppendError(out, s.acceptError(err, errs))
		}
		wctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		if err := s.buf.WaitCommitted(wctx, tk.Seq); err != nil {
			s.m.commandErrors.Inc()
			return resp.AppendError(out, fmt.Sprintf("TIMEOUT set operation journaled but not committed within %s (%v); it will be applied when the database answers, and its reply is lost: read SISMEMBER", s.opts.Timeout, err))
		}
		var n int64
		for _, it := range items {
			o, ok := s.buf.Outcome(change.OpID(it))
			if !ok {
				s.m.commandErrors.Inc()
				return resp.AppendError(out, errNoOutcome)
			}
			n += o
		}
		return resp.AppendInt(out, n)
	}
}

// setMembers answers SISMEMBER key member (many false) or SMISMEMBER key
// member [member ...], from the stored set.
func setMembers(many bool) func(s *Server, ctx context.Context, out []byte, args [][]byte) []byte {
	return func(s *Server, ctx context.Context, out []byte, args [][]byte) []byte {
		key, members, msg := parseSetArgs(args)
		if msg != "" {
			s.m.commandErrors.Inc()
			return resp.AppendError(out, msg)
		}
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		is := make([]int64, len(members))
		for i, m := range members {
			est, err := s.buf.Value(ctx, change.SetOp, change.SetMemberKey(key, m))
			if err != nil {
				s.m.commandErrors.Inc()
				return resp.AppendError(out, "ERR read set member: "+err.Error())
			}
			is[i] = est.Total
		}
		if !many {
			return resp.AppendInt(out, is[0])
		}
		out = resp.AppendArrayHeader(out, len(is))
		for _, v := range is {
			out = resp.AppendInt(out, v)
		}
		return out
	}
}

// scard answers SCARD key: the key's total, as GET reads it.
func (s *Server) scard(ctx context.Context, out []byte, args [][]byte) []byte {
	if err := checkKey(args[1]); err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, err.Error())
	}
	est, msg := s.read(ctx, []string{string(args[1])})
	if msg != "" {
		return resp.AppendError(out, msg)
	}
	return resp.AppendInt(out, est[0].Total)
}
