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

// errBudgetInMulti refuses the budget commands inside MULTI: TAKE may wait
// on the database and its grant cannot be undone, so it cannot join a
// transaction's all-or-nothing journal record.
const errBudgetInMulti = "ERR BUDGET, TAKE and NEXT are not allowed inside MULTI: send them outside a transaction"

// budgetCommands are the budgets' entries of the command table.
var budgetCommands = []*cmdSpec{
	{name: "budget", arity: -2, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@slow"},
		group: "counterd", since: "1.0.0", complexity: "O(1)",
		summary: "BUDGET key n adds n to a budget (creating it) and replies the unleased remainder; BUDGET key replies [remaining, granted, leased].",
		run:     (*session).budget, blocking: true, refusal: errBudgetInMulti},
	{name: "take", arity: -2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@fast"},
		group: "counterd", since: "1.0.0", complexity: "O(1)",
		summary: "TAKE key [n] grants n units (default 1) of a budget, all or nothing: replies n, or 0 when the budget cannot cover n.",
		run:     (*session).take, fast: (*session).takeFast, blocking: true, refusal: errBudgetInMulti},
	{name: "next", arity: 2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@fast"},
		group: "counterd", since: "1.0.0", complexity: "O(1)",
		summary: "NEXT key replies a number of a sequence, from 1, that no other call of any daemon ever gets.",
		run:     (*session).next, blocking: true, refusal: errBudgetInMulti},
}

// budgetKey returns the budgets and the call's key, or false having
// answered why not.
func (c *session) budgetKey(args [][]byte) (*budget.Manager, string, bool) {
	b := c.s.opts.Budgets
	if b == nil {
		c.fail("ERR budgets are not enabled on this server")
		return nil, "", false
	}
	if err := checkKey(args[1]); err != nil {
		c.fail(err.Error())
		return nil, "", false
	}
	return b, string(args[1]), true
}

// budget answers BUDGET key (its [remaining, granted, leased]) and BUDGET
// key n (adds n; replies the unleased remainder).
func (c *session) budget(ctx context.Context, args [][]byte) error {
	b, key, ok := c.budgetKey(args)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.s.opts.Timeout)
	defer cancel()
	switch len(args) {
	case 2:
		t, err := b.Read(ctx, key)
		if err != nil {
			c.fail("ERR " + err.Error())
			return nil
		}
		c.out = resp.AppendArrayHeader(c.out, 3)
		c.out = resp.AppendInt(c.out, t.Remaining)
		c.out = resp.AppendInt(c.out, t.Granted)
		c.out = resp.AppendInt(c.out, t.Leased)
	case 3:
		c.budgetAdd(ctx, b, key, args[2])
	default:
		c.fail(arityError("budget"))
	}
	return nil
}

func (c *session) budgetAdd(ctx context.Context, b *budget.Manager, key string, arg []byte) {
	n, ok := resp.ParseInt(arg)
	if !ok {
		c.fail(errNotInt)
		return
	}
	r, err := b.Add(ctx, key, n)
	switch {
	case errors.Is(err, budget.ErrBelowGranted), errors.Is(err, budget.ErrTotalOverflow):
		c.fail(fmt.Sprintf("ERR cannot add %d to budget: %v", n, err))
	case err != nil:
		c.fail("ERR " + err.Error())
	default:
		c.out = resp.AppendInt(c.out, r)
	}
}

// takeUnits parses TAKE's units (default 1), or reports false.
func takeUnits(args [][]byte) (int64, bool) {
	if len(args) < 3 {
		return 1, true
	}
	n, ok := resp.ParseInt(args[2])
	return n, ok && n >= 1
}

// take answers a TAKE its fast path (takeFast) did not grant from a lease
// in hand: it waits for the budget's grant.
func (c *session) take(ctx context.Context, args [][]byte) error {
	b, key, ok := c.budgetKey(args)
	if !ok {
		return nil
	}
	if len(args) > 3 {
		c.fail(arityError("take"))
		return nil
	}
	n, ok := takeUnits(args)
	if !ok {
		c.fail("ERR units must be an integer of at least 1")
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.s.opts.Timeout)
	defer cancel()
	got, err := b.Take(ctx, key, n)
	var nd *budget.NotDurableError
	switch {
	case errors.As(err, &nd):
		c.fail(fmt.Sprintf("TIMEOUT %d units granted and journaled, %v; the grant stands, do not retry", got, nd.Err))
	case errors.Is(err, budget.ErrLeasesNotReturned):
		// Not 0: the units may be in those leases. Redis's TRYAGAIN is
		// the transient refusal clients retry.
		c.fail("TRYAGAIN " + err.Error() + " (the daemon is recovering them), retry shortly; not granted")
	case err != nil:
		c.fail("ERR " + err.Error() + "; not granted")
	default:
		c.out = resp.AppendInt(c.out, got)
	}
	return nil
}

// next answers NEXT key.
func (c *session) next(ctx context.Context, args [][]byte) error {
	b, key, ok := c.budgetKey(args)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.s.opts.Timeout)
	defer cancel()
	n, err := b.Next(ctx, key)
	if err != nil {
		c.fail("ERR " + err.Error())
		return nil
	}
	c.out = resp.AppendInt(c.out, n)
	return nil
}

// takeFast adds a well-formed TAKE that a lease in hand can grant to the
// session's group, as the increments' fast path does, and reports whether
// it did: a pipeline's grants and increments are then one journal append,
// and the group's reply for it is the grant's Delta, n. Anything else is
// left to take.
func (c *session) takeFast(spec *cmdSpec, args [][]byte) bool {
	b := c.s.opts.Budgets
	if b == nil || len(args) < 2 || len(args) > 3 || checkKey(args[1]) != nil {
		return false
	}
	n, ok := takeUnits(args)
	if !ok {
		return false
	}
	// The key aliases the read buffer until the group ends, as for
	// increments: Reserve keeps nothing of it and AddGroup copies it.
	key := unsafe.String(unsafe.SliceData(args[1]), len(args[1]))
	g, ok := b.Reserve(key, n)
	if !ok {
		return false
	}
	c.conn.lastCmd.Store(spec)
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
