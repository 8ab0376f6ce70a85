package storetest

import (
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Budget grants (change.Grant: units TAKE granted from a lease, Bucket
// the lease) are recorded against their lease in the round's own lanes,
// exactly once: the lease's units move from leased to granted, never
// beyond the lease.
var grants = []subtest{
	{"ExactlyOnce", func(t *testing.T, s Store) {
		lease := mustLease(t, s, "gift", 100)
		grant := func(n int64) change.Change {
			return change.Change{Key: "gift", Kind: change.Grant, Bucket: lease, Delta: n}
		}
		applyDup(t, s, round("h", "g", 1), false, grant(30), inc("views", 1))
		applyDup(t, s, round("h", "g", 1), true, grant(30), inc("views", 1))
		wantBudget(t, s, "gift", 30, 70)

		// A round that failed part way is replayed: its grant is
		// recorded once, whether its lane was among those committed or
		// not.
		var other string
		for _, k := range laneKeys("v:", 1) {
			if store.LaneOf(k[0]) != store.LaneOf("gift") {
				other = k[0]
			}
		}
		// In sequence order: a round below a lane's watermark is skipped
		// there, so round 3 must come after round 2 (a map's order is
		// random: the other order failed a loaded make test run).
		for _, r := range []struct {
			seq  uint64
			lane int
		}{{2, store.LaneOf(other)}, {3, store.LaneOf("gift")}} {
			seq, lane := r.seq, r.lane
			id := round("h", "g", seq)
			if err := s.CommitLanes(testContext(t), id, []change.Change{grant(int64(seq)), inc(other, 1)}, []int{lane}); err != nil {
				t.Fatal(err)
			}
			applyDup(t, s, id, false, grant(int64(seq)), inc(other, 1))
		}
		wantBudget(t, s, "gift", 35, 65)
		wantTotals(t, s, map[string]int64{"views": 1, other: 2})
	}},
	{"NeverBeyondTheLease", func(t *testing.T, s Store) {
		lease := mustLease(t, s, "gift", 10)
		grant := func(n int64) change.Change {
			return change.Change{Key: "gift", Kind: change.Grant, Bucket: lease, Delta: n}
		}
		apply(t, s, round("h", "g", 1), grant(4))
		// More than is left of the lease: the store may refuse the round,
		// but never records units the lease does not hold.
		_, err := s.ApplyOnce(testContext(t), round("h", "g", 2), []change.Change{grant(7)})
		granted, leased, berr := s.Budget(testContext(t), "gift")
		if berr != nil {
			t.Fatal(berr)
		}
		if granted > 10 || granted+leased != 10 {
			t.Errorf("after granting 7 of the 6 left (ApplyOnce: %v): granted %d, leased %d; want granted at most 10 and 10 in all", err, granted, leased)
		}
	}},
	{"UnknownLease", func(t *testing.T, s Store) {
		// A lease deleted before its grants were recorded (only a journal
		// restored from an old snapshot gets there): the grant is dropped
		// and the round's other changes are written, since failing would
		// stop every later round too.
		lease := mustLease(t, s, "gift", 10)
		apply(t, s, round("h", "g", 1), change.Change{Key: "gift", Kind: change.Grant, Bucket: lease + 1000, Delta: 3}, inc("views", 1))
		wantBudget(t, s, "gift", 0, 10)
		wantTotals(t, s, map[string]int64{"views": 1})
	}},
}

func mustLease(t *testing.T, s Store, key string, units int64) int64 {
	t.Helper()
	lease, err := s.Lease(testContext(t), key, units)
	if err != nil {
		t.Fatalf("lease %d units of %s: %v", units, key, err)
	}
	wantBudget(t, s, key, 0, units)
	return lease
}

func wantBudget(t *testing.T, s Store, key string, granted, leased int64) {
	t.Helper()
	g, l, err := s.Budget(testContext(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if g != granted || l != leased {
		t.Errorf("budget %s: granted %d, leased %d; want %d, %d", key, g, l, granted, leased)
	}
}
