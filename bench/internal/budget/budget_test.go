package budget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/budget"
	"github.com/counterd/counterd/internal/pgtest"
)

// long bounds runs that end when the budget is spent; it is never
// reached unless something is broken.
const long = time.Minute

func setup(t *testing.T, conns int32) *pgtest.DB {
	t.Helper()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: conns})
	if err := budget.Setup(context.Background(), db.Pool); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestExactApproachesNeverOverspend spends a small budget from many
// clients: every unit is granted once, none more.
func TestExactApproachesNeverOverspend(t *testing.T) {
	t.Parallel()
	for _, a := range budget.All() {
		if !a.Exact {
			continue
		}
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			db := setup(t, 10)
			res, err := budget.Run(context.Background(), db.Pool, a, budget.Load{ID: 1, Budget: 300, Clients: 8, Duration: long})
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != 0 || !res.Exhausted {
				t.Fatalf("errors %d (%v), exhausted %v; want none and exhausted", res.Errors, res.Err, res.Exhausted)
			}
			if res.Grants != 300 || res.Remaining != 0 || res.Overspend() != 0 || res.Underspend() != 0 {
				t.Fatalf("grants %d remaining %d overspend %d underspend %d; want 300, 0, 0, 0",
					res.Grants, res.Remaining, res.Overspend(), res.Underspend())
			}
			if res.P50 <= 0 || res.P99 < res.P50 {
				t.Fatalf("p50 %v p99 %v; want 0 < p50 ≤ p99", res.P50, res.P99)
			}
		})
	}
}

// TestNaiveAccounts: the naive approach may overspend (reported, not
// asserted), but what it granted is what left the row.
func TestNaiveAccounts(t *testing.T) {
	t.Parallel()
	db := setup(t, 10)
	res, err := budget.Run(context.Background(), db.Pool, budget.Naive, budget.Load{ID: 7, Budget: 300, Clients: 8, Duration: long})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || !res.Exhausted {
		t.Fatalf("errors %d (%v), exhausted %v; want none and exhausted", res.Errors, res.Err, res.Exhausted)
	}
	if res.Grants+res.Remaining != 300 || res.Grants < 300 || res.Underspend() != 0 {
		t.Fatalf("grants %d + remaining %d; want 300 with at least 300 granted and no underspend", res.Grants, res.Remaining)
	}
	if res.Overspend() != -res.Remaining {
		t.Fatalf("overspend %d; want %d, what the row went below zero", res.Overspend(), -res.Remaining)
	}
	t.Logf("naive overspent %d of 300 with 8 clients", res.Overspend())
}

// TestRunStopsAtDuration: a budget too large to spend ends with the time
// and leaves exactly what was not granted.
func TestRunStopsAtDuration(t *testing.T) {
	t.Parallel()
	db := setup(t, 4)
	res, err := budget.Run(context.Background(), db.Pool, budget.LockFree, budget.Load{ID: 2, Budget: 1 << 40, Clients: 2, Duration: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exhausted || res.Grants == 0 || res.Remaining != 1<<40-res.Grants || res.Underspend() != 0 {
		t.Fatalf("exhausted %v grants %d remaining %d; want not exhausted, some grants, the rest remaining", res.Exhausted, res.Grants, res.Remaining)
	}
}

// TestDriveCounts checks Drive's accounting with takers that need no
// server: errors are counted and survived, a refusal ends a client, and a
// cell ends exhausted only when every client was refused.
func TestDriveCounts(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	// script returns a taker that replies in order: 'g' grant, 'e'
	// error, 'r' refusal; past the end it refuses.
	script := func(s string) budget.Taker {
		i := 0
		return func(context.Context) (bool, error) {
			if i >= len(s) {
				return false, nil
			}
			c := s[i]
			i++
			switch c {
			case 'g':
				return true, nil
			case 'e':
				return false, boom
			}
			return false, nil
		}
	}
	got := budget.Drive(context.Background(), []budget.Taker{script("ggeg"), script("grggg"), script("")}, long)
	if got.Grants != 4 || got.Errors != 1 || !got.Exhausted || !errors.Is(got.Err, boom) {
		t.Fatalf("grants %d errors %d exhausted %v err %v; want 4, 1, true, boom", got.Grants, got.Errors, got.Exhausted, got.Err)
	}
	// A client that always errs stops after its error allowance, which
	// is not a refusal.
	always := func(context.Context) (bool, error) { return false, boom }
	got = budget.Drive(context.Background(), []budget.Taker{script("g"), always}, long)
	if got.Exhausted || got.Grants != 1 || got.Errors < 1 {
		t.Fatalf("exhausted %v grants %d errors %d; want not exhausted, 1 grant, errors", got.Exhausted, got.Grants, got.Errors)
	}
}

func TestAccounting(t *testing.T) {
	t.Parallel()
	f := func(budgetN, granted, remaining, over, under int64) {
		t.Helper()
		if got := budget.Overspend(budgetN, granted); got != over {
			t.Errorf("Overspend(%d, %d) = %d; want %d", budgetN, granted, got, over)
		}
		if got := budget.Underspend(budgetN, granted, remaining); got != under {
			t.Errorf("Underspend(%d, %d, %d) = %d; want %d", budgetN, granted, remaining, got, under)
		}
	}
	f(100, 100, 0, 0, 0)  // spent exactly
	f(100, 40, 60, 0, 0)  // time ran out, the rest remains
	f(100, 103, -3, 3, 0) // naive overspend
	f(100, 90, 4, 0, 6)   // 6 forfeited
	f(100, 90, 10, 0, 0)  // leases returned
	f(100, 0, 100, 0, 0)  // nothing taken
	f(100, 101, 0, 1, 0)  // overspend with an honest remainder
}
