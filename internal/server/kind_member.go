package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/glob"
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
	{name: "smembers", arity: 2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO"}, acl: []string{"@read", "@set", "@slow"},
		group: "set", since: "1.0.0", complexity: "O(N) where N is the set cardinality",
		summary: "Returns the members of the exact set as stored, in byte order; refused for a set of more than 10,000 members (use SSCAN).",
		run:     (*session).smembers, blocking: true, refusal: notInMulti("smembers")},
	{name: "sscan", arity: -3, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO"}, acl: []string{"@read", "@set", "@slow"},
		group: "set", since: "2.8.0", complexity: "O(1) for every call. O(N) for a complete iteration.",
		summary: "Iterates the members of the exact set as stored, in byte order: COUNT members a call (at most 10,000), filtered by MATCH.",
		run:     (*session).sscan, blocking: true, refusal: notInMulti("sscan")},
}

// maxSMembers is the most members SMEMBERS replies; a larger set is
// listed with SSCAN (or counter_set_members_of's cursor in SQL).
const maxSMembers = 10_000

// smembers answers SMEMBERS key from the stored set.
func (c *session) smembers(ctx context.Context, args [][]byte) error {
	s := c.s
	if err := checkKey(args[1]); err != nil {
		s.m.commandErrors.Inc()
		c.out = resp.AppendError(c.out, err.Error())
		return nil
	}
	members, msg := s.listMembers(ctx, string(args[1]), nil, maxSMembers+1)
	switch {
	case msg != "":
		c.out = resp.AppendError(c.out, msg)
	case len(members) > maxSMembers:
		s.m.commandErrors.Inc()
		c.out = resp.AppendError(c.out, fmt.Sprintf("ERR set has more than %d members: list it with SSCAN", maxSMembers))
	default:
		c.out = appendMembers(c.out, c.conn.resp3, members)
	}
	return nil
}

// appendMembers appends members as a set (RESP3) or an array.
func appendMembers(out []byte, resp3 bool, members [][]byte) []byte {
	if resp3 {
		out = resp.AppendSetHeader(out, len(members))
	} else {
		out = resp.AppendArrayHeader(out, len(members))
	}
	for _, m := range members {
		out = resp.AppendBulk(out, m)
	}
	return out
}

// listMembers lists up to n members of key after after, or says why not.
func (s *Server) listMembers(ctx context.Context, key string, after []byte, n int) ([][]byte, string) {
	if s.opts.SetMembers == nil {
		s.m.commandErrors.Inc()
		return nil, "ERR this daemon's store does not list set members"
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	members, err := s.opts.SetMembers(ctx, key, after, n)
	if err != nil {
		s.m.commandErrors.Inc()
		return nil, "ERR read set members: " + err.Error()
	}
	return members, ""
}

// sscan answers SSCAN key cursor [MATCH pattern] [COUNT n]. A cursor
// names the last member a call replied (s.cursors): it is this daemon's,
// kept for the last maxCursors calls that returned one; an unknown one is
// an error. Members are in byte order, so a member in the set for the
// whole iteration is returned exactly once, as Redis promises, and one
// added or removed meanwhile may or may not be.
func (c *session) sscan(ctx context.Context, args [][]byte) error {
	s := c.s
	fail := func(msg string) error {
		s.m.commandErrors.Inc()
		c.out = resp.AppendError(c.out, msg)
		return nil
	}
	if err := checkKey(args[1]); err != nil {
		return fail(err.Error())
	}
	key := string(args[1])
	cur, ok := resp.ParseInt(args[2])
	if !ok || cur < 0 {
		return fail("ERR invalid cursor")
	}
	count, pattern := int64(10), ""
	for i := 3; i < len(args); i += 2 {
		if i+1 == len(args) {
			return fail("ERR syntax error")
		}
		switch strings.ToUpper(string(args[i])) {
		case "COUNT":
			if count, ok = resp.ParseInt(args[i+1]); !ok || count < 1 {
				return fail("ERR value is out of range, must be positive")
			}
			count = min(count, maxSMembers)
		case "MATCH":
			pattern = string(args[i+1])
		default:
			return fail("ERR syntax error")
		}
	}
	var after []byte
	if cur != 0 {
		if after, ok = s.cursors.take(key, uint64(cur)); !ok {
			return fail("ERR invalid cursor: SSCAN cursors are kept by the daemon that returned them, for its last 10000 scans")
		}
	}
	members, msg := s.listMembers(ctx, key, after, int(count))
	if msg != "" {
		c.out = resp.AppendError(c.out, msg)
		return nil
	}
	next := uint64(0)
	if len(members) == int(count) {
		next = s.cursors.put(key, members[len(members)-1])
	}
	if pattern != "" {
		members = slices.DeleteFunc(members, func(m []byte) bool { return !glob.MatchRedis(pattern, string(m)) })
	}
	c.out = resp.AppendArrayHeader(c.out, 2)
	c.out = resp.AppendBulkString(c.out, strconv.FormatUint(next, 10))
	c.out = resp.AppendArrayHeader(c.out, len(members))
	for _, m := range members {
		c.out = resp.AppendBulk(c.out, m)
	}
	return nil
}

// maxCursors is how many SSCAN cursors a daemon keeps.
const maxCursors = 10_000

// scanCursors keeps where SSCAN iterations are: a cursor (never 0) names
// a key and the last member replied. The oldest goes when a new one
// would exceed maxCursors.
type scanCursors struct {
	mu    sync.Mutex
	next  uint64
	at    map[uint64]scanCursor
	order []uint64 // by age, oldest first; may hold taken cursors
}

type scanCursor struct {
	key   string
	after []byte
}

// put keeps a cursor after member of key, and returns it.
func (sc *scanCursors) put(key string, member []byte) uint64 {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.at == nil {
		sc.at = make(map[uint64]scanCursor)
	}
	for len(sc.at) >= maxCursors || len(sc.order) >= 2*maxCursors {
		delete(sc.at, sc.order[0])
		sc.order = sc.order[1:]
	}
	sc.next++
	sc.at[sc.next] = scanCursor{key: key, after: slices.Clone(member)}
	sc.order = append(sc.order, sc.next)
	return sc.next
}

// take returns, and forgets, where cursor id of key is.
func (sc *scanCursors) take(key string, id uint64) ([]byte, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	cur, ok := sc.at[id]
	if !ok || cur.key != key {
		return nil, false
	}
	delete(sc.at, id)
	return cur.after, true
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
	switch {
	case !ok:
		return 0, errNoOutcome
	case o == change.Refused:
		return 0, errSetFull
	}
	return o, ""
}

// errSetFull is the reply of an SADD a full set refused.
var errSetFull = fmt.Sprintf("ERR set is full: it holds %d members, the most a set holds; the member was not added", change.MaxSetMembers)

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

// clearMembers is the change a DEL or SET of key adds to its Set: it
// empties key's exact set, after the key's set operations accepted
// before it (change.SetClearChange).
func clearMembers(key string, now time.Time) change.Change {
	return change.SetClearChange(key, nextSetToken(now.UnixMicro()))
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
		var n, refused int64
		for _, it := range items {
			o, ok := s.buf.Outcome(change.OpID(it))
			switch {
			case !ok:
				s.m.commandErrors.Inc()
				return resp.AppendError(out, errNoOutcome)
			case o == change.Refused:
				refused++
			default:
				n += o
			}
		}
		if refused > 0 {
			s.m.commandErrors.Inc()
			return resp.AppendError(out, fmt.Sprintf("ERR set is full: it holds %d members, the most a set holds; %d members were not added, %d were", change.MaxSetMembers, refused, n))
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
