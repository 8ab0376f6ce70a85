package budget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/budget"
	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// This test records grants through the PostgreSQL store's rounds, which
// call RecordGrants, so it lives outside package budget (slots imports
// budget).

// Every statement moves units between states without losing or creating
// any: leases, recorded grants (with exactly-once lanes), returns,
// forfeits, grants recorded after a forfeit, and the holder's reclaim.
func TestStatementsKeepTheInvariant(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st := budget.NewStore(db.Pool)
	ss, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
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
	step := func(name string, want budget.Totals) {
		t.Helper()
		want.Total = want.Remaining + want.Granted + want.Leased + want.Forfeited
		if got := budget.ReadTotals(t, st, "gift"); got != want {
			t.Errorf("after %s: %+v; want %+v", name, got, want)
		}
		budget.CheckInvariant(t, db)
	}

	if _, err := st.Add(ctx, "gift", 1000); err != nil {
		t.Fatal(err)
	}
	l1, size, err := st.Lease(ctx, "gift", "holder-a", 0, 100, 4, time.Minute)
	if err != nil || size != 100 {
		t.Fatalf("lease: %d, %v", size, err)
	}
	step("lease 100", budget.Totals{Remaining: 900, Leased: 100})
	record(l1, 30)
	step("30 granted and recorded twice", budget.Totals{Remaining: 900, Granted: 30, Leased: 70})
	for range 2 { // a retry after a lost reply returns nothing twice
		if err := st.GiveBack(ctx, []int64{l1}, []int64{20}); err != nil {
			t.Fatal(err)
		}
	}
	step("20 returned", budget.Totals{Remaining: 920, Granted: 30, Leased: 50})
	if ok, err := st.Take(ctx, "gift", 20); err != nil || !ok {
		t.Fatalf("direct take: %v, %v", ok, err)
	}
	step("20 taken directly", budget.Totals{Remaining: 900, Granted: 50, Leased: 50})

	l2, _, err := st.Lease(ctx, "gift", "holder-b", 0, 40, 4, 0) // expires at once
	if err != nil {
		t.Fatal(err)
	}
	step("lease 40 to b", budget.Totals{Remaining: 860, Granted: 50, Leased: 90})
	if _, err := st.Forfeit(ctx); err != nil {
		t.Fatal(err)
	}
	step("b's lease forfeited", budget.Totals{Remaining: 860, Granted: 50, Leased: 50, Forfeited: 40})
	idB := store.Identity{Instance: "holder-b", Generation: "g1"}
	if _, err := ss.ApplyOnce(ctx, store.BatchID{Identity: idB, Seq: 1}, []change.Change{{Key: "gift", Kind: change.Grant, Bucket: l2, Delta: 15}}); err != nil {
		t.Fatal(err)
	}
	step("b's late grant of 15", budget.Totals{Remaining: 860, Granted: 65, Leased: 50, Forfeited: 25})
	if n, units, err := st.Reclaim(ctx, "holder-b"); err != nil || n != 1 || units != 25 {
		t.Fatalf("reclaim b: %d leases, %d units, %v", n, units, err)
	}
	step("b came back and returned its lease", budget.Totals{Remaining: 885, Granted: 65, Leased: 50})

	if _, err := st.Add(ctx, "gift", -886); !errors.Is(err, budget.ErrBelowGranted) {
		t.Errorf("BUDGET gift -886: %v; want budget.ErrBelowGranted", err)
	}
	if r, err := st.Add(ctx, "gift", -885); err != nil || r != 0 {
		t.Errorf("BUDGET gift -885: %d, %v; want 0", r, err)
	}
	step("total lowered to what is out", budget.Totals{Granted: 65, Leased: 50})
	if ok, err := st.Take(ctx, "gift", 1); err != nil || ok {
		t.Errorf("direct take from an empty remainder: %v, %v; want refused", ok, err)
	}
	if _, size, err := st.Lease(ctx, "gift", "holder-a", 0, 100, 1, time.Minute); err != nil || size != 0 {
		t.Errorf("lease from an empty remainder: %d, %v; want none", size, err)
	}
	if _, err := st.Add(ctx, "nothing", -1); !errors.Is(err, budget.ErrBelowGranted) {
		t.Errorf("BUDGET nothing -1: %v; want budget.ErrBelowGranted", err)
	}
	if n, units, err := st.Reclaim(ctx, "holder-a"); err != nil || n != 1 || units != 50 {
		t.Fatalf("reclaim a: %d leases, %d units, %v", n, units, err)
	}
	step("a returned its lease", budget.Totals{Remaining: 50, Granted: 65})
}
