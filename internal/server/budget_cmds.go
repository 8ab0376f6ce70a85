package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/counterd/counterd/internal/budget"
	"github.com/counterd/counterd/internal/resp"
)

// Budgets (internal/budget): BUDGET, TAKE and NEXT. Their keys are a
// keyspace of their own: GET of a budget's key reads a counter.

func init() {
	commandTable = append(commandTable,
		&cmdSpec{name: "budget", arity: -2, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 1, step: 1,
			keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@slow"},
			group: "counterd", since: "1.0.0", complexity: "O(1)",
			summary: "BUDGET key n adds n to a budget (creating it) and replies the unleased remainder; BUDGET key replies [remaining, granted, leased]."},
		&cmdSpec{name: "take", arity: -2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1,
			keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@fast"},
			group: "counterd", since: "1.0.0", complexity: "O(1)",
			summary: "TAKE key [n] grants n units (default 1) of a budget, all or nothing: replies n, or 0 when the budget cannot cover n."},
		&cmdSpec{name: "next", arity: 2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1,
			keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@fast"},
			group: "counterd", since: "1.0.0", complexity: "O(1)",
			summary: "NEXT key replies a number of a sequence, from 1, that no other call of any daemon ever gets."},
	)
}

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
