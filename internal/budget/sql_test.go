package budget

import (
	"context"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// checkInvariant fails unless every budget keeps granted + leased +
// forfeited + remaining = total with remaining >= 0, and leased and
// forfeited equal the sizes of its live and forfeited leases.
func checkInvariant(t *testing.T, db *pgtest.DB) {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
SELECT b.key, b.total, b.granted, b.leased, b.forfeited,
       coalesce((SELECT sum(size) FROM budget_leases l WHERE l.key = b.key AND NOT l.forfeited), 0)::bigint,
       coalesce((SELECT sum(size) FROM budget_leases l WHERE l.key = b.key AND l.forfeited), 0)::bigint
FROM budgets b`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var total, granted, leased, forfeited, live, dead int64
		if err := rows.Scan(&key, &total, &granted, &leased, &forfeited, &live, &dead); err != nil {
			t.Fatal(err)
		}
		if granted+leased+forfeited > total || leased != live || forfeited != dead {
			t.Errorf("%s: total %d, granted %d, leased %d (leases %d), forfeited %d (leases %d)", key, total, granted, leased, live, forfeited, dead)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

func totals(t *testing.T, st *Store, key string) Totals {
	t.Helper()
	tot, err := st.Read(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return tot
}

// The lease statement grants what grantable says, for remainders down to
// zero, and never more than the remainder.
func TestLeaseSQLMatchesGrantable(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st := NewStore(db.Pool)
	ctx := context.Background()
	for _, tc := range []struct{ remaining, w, floor int64 }{
		{1_000_000, 1000, 4}, {1000, 1000, 4}, {40, 1000, 4}, {16, 1000, 4}, {15, 1000, 4},
		{100, 1000, 30}, {0, 1, 4}, {3, 1, 1},
	} {
		key := "b" + time.Now().Format("150405.000000000")
		if _, err := st.Add(ctx, key, tc.remaining); err != nil {
			t.Fatal(err)
		}
		_, size, err := st.Lease(ctx, key, "h", 0, tc.w, tc.floor, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if want := grantable(tc.remaining, tc.w, tc.floor); size != want {
			t.Errorf("remaining %d, want %d, floor %d: leased %d; grantable says %d", tc.remaining, tc.w, tc.floor, size, want)
		}
		if got := totals(t, st, key); got.Remaining != tc.remaining-size || got.Leased != size {
			t.Errorf("remaining %d: after a lease of %d, totals %+v", tc.remaining, size, got)
		}
	}
	checkInvariant(t, db)
}

// The database itself refuses a statement that would overspend.
func TestConstraintRefusesOverspend(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	if _, err := NewStore(db.Pool).Add(ctx, "k", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE budgets SET granted = 11 WHERE key = 'k'`); err == nil {
		t.Error("granted beyond the total was accepted")
	}
}

func TestNextRanges(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st := NewStore(db.Pool)
	ctx := context.Background()
	for _, tc := range []struct{ n, lo int64 }{{1, 1}, {10, 2}, {5, 12}, {1, 17}} {
		lo, err := st.NextRange(ctx, "seq", tc.n)
		if err != nil || lo != tc.lo {
			t.Errorf("range of %d: lo %d, %v; want %d", tc.n, lo, err, tc.lo)
		}
	}
}
