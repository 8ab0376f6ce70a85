package server

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/counterd/counterd/internal/budget"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/resp"
)

// Budgets (internal/budget): BUDGET, TAKE and NEXT. Their keys are a
// keyspace of their own: GET of a budget's key reads a counter.

// The budget commands' specs; init adds them to the command table.
var (
	cmdBudget = &cmdSpec{name: "budget", arity: -2, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@slow"},
		group: "counterd", since: "1.0.0", complexity: "O(1)",
		summary: "BUDGET key n adds n to a budget (creating it) and replies the unleased remainder; BUDGET key replies [remaining, granted, leased]."}
	cmdTake = &cmdSpec{name: "take", arity: -2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@fast"},
		group: "counterd", since: "1.0.0", complexity: "O(1)",
		summary: "TAKE key [n] grants n units (default 1) of a budget, all or nothing: replies n, or 0 when the budget cannot cover n."}
	cmdNext = &cmdSpec{name: "next", arity: 2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@fast"},
		group: "counterd", since: "1.0.0", complexity: "O(1)",
		summary: "NEXT key replies a number of a sequence, from 1, that no other call of any daemon ever gets."}
)

func init() { commandTable = append(commandTable, cmdBudget, cmdTake, cmdNext) }

// errBudgetInMulti refuses the budget commands inside MULTI: TAKE may wait
// on the database and its grant cannot be undone, so it cannot join a
// transaction's all-or-nothing journal record.
const errBudgetInMulti = "ERR BUDGET, TAKE and NEXT are not allowed inside MULTI: send them outside a transaction"

// isBudgetCommand reports whether name is BUDGET, TAKE or NEXT.
func isBudgetCommand(name []byte) bool {
	return is(name, "BUDGET") || is(name, "TAKE") || is(name, "NEXT")
}

// budgetCommand answers BUDGET, TAKE and NEXT and reports whether args was
// one of them; connCommand has checked the name and arity.
func (s *Server) budgetCommand(ctx context.Context, out []byte, args [][]byte) ([]byte, bool) {
	name := args[0]
	if !isBudgetCommand(name) {
		return out, false
	}
	fail := func(msg string) ([]byte, bool) {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, msg), true
	}
	b := s.opts.Budgets
	if b == nil {
		return fail("ERR budgets are not enabled on this server")
	}
	if err := checkKey(args[1]); err != nil {
		return fail(err.Error())
	}
	key := string(args[1])
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	switch {
	case is(name, "TAKE"):
		n := int64(1)
		if len(args) > 3 {
			return fail("ERR wrong number of arguments for 'take' command")
		}
		if len(args) == 3 {
			var ok bool
			if n, ok = resp.ParseInt(args[2]); !ok || n < 1 {
				return fail("ERR units must be an integer of at least 1")
			}
		}
		got, err := b.Take(ctx, key, n)
		var nd *budget.NotDurableError
		switch {
		case errors.As(err, &nd):
			return fail(fmt.Sprintf("TIMEOUT %d units granted and journaled, %v; the grant stands, do not retry", got, nd.Err))
		case err != nil:
			return fail("ERR " + err.Error() + "; not granted")
		}
		return resp.AppendInt(out, got), true
	case is(name, "NEXT"):
		n, err := b.Next(ctx, key)
		if err != nil {
			return fail("ERR " + err.Error())
		}
		return resp.AppendInt(out, n), true
	}
	switch len(args) {
	case 2:
		t, err := b.Read(ctx, key)
		if err != nil {
			return fail("ERR " + err.Error())
		}
		out = resp.AppendArrayHeader(out, 3)
		out = resp.AppendInt(out, t.Remaining)
		out = resp.AppendInt(out, t.Granted)
		return resp.AppendInt(out, t.Leased), true
	case 3:
		n, ok := resp.ParseInt(args[2])
		if !ok {
			return fail(errNotInt)
		}
		r, err := b.Add(ctx, key, n)
		if errors.Is(err, budget.ErrBelowGranted) {
			return fail(fmt.Sprintf("ERR cannot add %d to budget: %v", n, err))
		}
		if err != nil {
			return fail("ERR " + err.Error())
		}
		return resp.AppendInt(out, r), true
	}
	return fail("ERR wrong number of arguments for 'budget' command")
}

// take adds a well-formed TAKE that a lease in hand can grant to the
// session's group, as incr does for increments, and reports whether it
// did: a pipeline's grants and increments are then one journal append,
// and the group's reply for it is the grant's Delta, n. Anything else is
// left to exec (Server.budgetCommand).
func (c *session) take(args [][]byte) bool {
	b := c.s.opts.Budgets
	if b == nil || len(args) < 2 || len(args) > 3 || !is(args[0], "TAKE") || checkKey(args[1]) != nil {
		return false
	}
	n := int64(1)
	if len(args) == 3 {
		var ok bool
		if n, ok = resp.ParseInt(args[2]); !ok || n < 1 {
			return false
		}
	}
	// The key aliases the read buffer until the group ends, as for
	// increments: Reserve keeps nothing of it and AddGroup copies it.
	key := unsafe.String(unsafe.SliceData(args[1]), len(args[1]))
	g, ok := b.Reserve(key, n)
	if !ok {
		return false
	}
	c.conn.lastCmd.Store(cmdTake)
	c.group = append(c.group, g)
	return true
}

// unreserve gives back the grants of a group that were not journaled:
// all of them when AddGroup failed (addErr), else those it refused.
func (s *Server) unreserve(group []change.Change, errs []error, addErr error) {
	if s.opts.Budgets == nil {
		return
	}
	for i, it := range group {
		if it.Kind == change.Grant && (addErr != nil || errs[i] != nil) {
			s.opts.Budgets.Unreserve(it)
		}
	}
}
