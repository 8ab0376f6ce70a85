package budget

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
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

// Every statement moves units between states without losing or creating
// any: leases, recorded grants (with exactly-once lanes), returns,
// forfeits, grants recorded after a forfeit, and the holder's reclaim.
func TestStatementsKeepTheInvariant(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st := NewStore(db.Pool)
	ss, err := slots.New(db.Pool, slots.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := store.Identity{Instance: "holder-a", Generation: "g1"}
	seq := uint64(0)
	record := func(lease, n int64) {
		t.Helper()
		seq++
		batch := []change.Change{{Key: "gift", Kind: change.Grant, Bucket: lease, Delta: n}, {Key: "views", Kind: change.Total, Delta: 1}}
		if _, err := ss.ApplyOnce(ctx, store.BatchID{Identity: id, Seq: seq}, batch); err != nil {
			t.Fatal(err)
		}
		// The same round again (a retry, or a replay after a crash) is
		// recorded once.
		if _, err := ss.ApplyOnce(ctx, store.BatchID{Identity: id, Seq: seq}, batch); err != nil {
			t.Fatal(err)
		}
	}
	step := func(name string, want Totals) {
		t.Helper()
		want.Total = want.Remaining + want.Granted + want.Leased + want.Forfeited
		if got := totals(t, st, "gift"); got != want {
			t.Errorf("after %s: %+v; want %+v", name, got, want)
		}
		checkInvariant(t, db)
	}

	if _, err := st.Add(ctx, "gift", 1000); err != nil {
		t.Fatal(err)
	}
	l1, size, err := st.Lease(ctx, "gift", "holder-a", 0, 100, 4, time.Minute)
	if err != nil || size != 100 {
		t.Fatalf("lease: %d, %v", size, err)
	}
	step("lease 100", Totals{Remaining: 900, Leased: 100})
	record(l1, 30)
	step("30 granted and recorded twice", Totals{Remaining: 900, Granted: 30, Leased: 70})
	for range 2 { // a retry after a lost reply returns nothing twice
		if err := st.GiveBack(ctx, []int64{l1}, []int64{20}); err != nil {
			t.Fatal(err)
		}
	}
	step("20 returned", Totals{Remaining: 920, Granted: 30, Leased: 50})
	if ok, err := st.Take(ctx, "gift", 20); err != nil || !ok {
		t.Fatalf("direct take: %v, %v", ok, err)
	}
	step("20 taken directly", Totals{Remaining: 900, Granted: 50, Leased: 50})

	l2, _, err := st.Lease(ctx, "gift", "holder-b", 0, 40, 4, 0) // expires at once
	if err != nil {
		t.Fatal(err)
	}
	step("lease 40 to b", Totals{Remaining: 860, Granted: 50, Leased: 90})
	if _, err := st.Forfeit(ctx); err != nil {
		t.Fatal(err)
	}
	step("b's lease forfeited", Totals{Remaining: 860, Granted: 50, Leased: 50, Forfeited: 40})
	idB := store.Identity{Instance: "holder-b", Generation: "g1"}
	if _, err := ss.ApplyOnce(ctx, store.BatchID{Identity: idB, Seq: 1}, []change.Change{{Key: "gift", Kind: change.Grant, Bucket: l2, Delta: 15}}); err != nil {
		t.Fatal(err)
	}
	step("b's late grant of 15", Totals{Remaining: 860, Granted: 65, Leased: 50, Forfeited: 25})
	if n, units, err := st.Reclaim(ctx, "holder-b"); err != nil || n != 1 || units != 25 {
		t.Fatalf("reclaim b: %d leases, %d units, %v", n, units, err)
	}
	step("b came back and returned its lease", Totals{Remaining: 885, Granted: 65, Leased: 50})

	if _, err := st.Add(ctx, "gift", -886); !errors.Is(err, ErrBelowGranted) {
		t.Errorf("BUDGET gift -886: %v; want ErrBelowGranted", err)
	}
	if r, err := st.Add(ctx, "gift", -885); err != nil || r != 0 {
		t.Errorf("BUDGET gift -885: %d, %v; want 0", r, err)
	}
	step("total lowered to what is out", Totals{Granted: 65, Leased: 50})
	if ok, err := st.Take(ctx, "gift", 1); err != nil || ok {
		t.Errorf("direct take from an empty remainder: %v, %v; want refused", ok, err)
	}
	if _, size, err := st.Lease(ctx, "gift", "holder-a", 0, 100, 1, time.Minute); err != nil || size != 0 {
		t.Errorf("lease from an empty remainder: %d, %v; want none", size, err)
	}
	if _, err := st.Add(ctx, "nothing", -1); !errors.Is(err, ErrBelowGranted) {
		t.Errorf("BUDGET nothing -1: %v; want ErrBelowGranted", err)
	}
	if n, units, err := st.Reclaim(ctx, "holder-a"); err != nil || n != 1 || units != 50 {
		t.Fatalf("reclaim a: %d leases, %d units, %v", n, units, err)
	}
	step("a returned its lease", Totals{Remaining: 50, Granted: 65})
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
