package storetest

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// SET (and DEL, a SET to 0) and EXPIRE ordered with increments. A round
// holds at most one change per key and kind, as the daemon nets them: a
// SET absorbs the increments after it, so a round's SET or increment and
// EXPIRE of one key meet, and the SET comes first (it removes the key's
// expiry, as in Redis, and the round's EXPIRE sets it again).
var setExpire = []subtest{
	{"InOneRound", func(t *testing.T, s Store) {
		id := store.BatchID{Identity: store.Identity{Instance: "o", Generation: "g"}}
		next := func(cs ...change.Change) {
			t.Helper()
			id.Seq++
			apply(t, s, id, cs...)
		}
		future := time.Now().Add(time.Hour).Unix()
		next(inc("a", 10), inc("b", 10), inc("c", 10))
		next(change.Change{Key: "a", Kind: change.Set, Delta: 3}, change.Change{Key: "a", Kind: change.Expire, Delta: future},
			inc("b", 4), change.Change{Key: "b", Kind: change.Expire, Delta: future},
			change.Change{Key: "c", Kind: change.Set, Delta: 0})
		snap := read(t, s, []string{"a", "b", "c"})
		for i, want := range []store.Estimate{{Total: 3, Expires: future * 1000}, {Total: 14, Expires: future * 1000}, {}} {
			if e := snap.Estimates[i]; e.Total != want.Total || e.Expires != want.Expires {
				t.Errorf("key %d: got %+v; want %+v", i, e, want)
			}
		}
		next(inc("a", 1), change.Change{Key: "a", Kind: change.Expire}, change.Change{Key: "b", Kind: change.Set, Delta: 7})
		snap = read(t, s, []string{"a", "b"})
		for i, want := range []store.Estimate{{Total: 4}, {Total: 7}} {
			if e := snap.Estimates[i]; e.Total != want.Total || e.Expires != want.Expires {
				t.Errorf("key %d after PERSIST and SET: got %+v; want %+v", i, e, want)
			}
		}
	}},
	{"AcrossRounds", func(t *testing.T, s Store) {
		id := store.BatchID{Identity: store.Identity{Instance: "o", Generation: "g"}}
		next := func(cs ...change.Change) {
			t.Helper()
			id.Seq++
			apply(t, s, id, cs...)
		}
		future := time.Now().Add(time.Hour).Unix()
		next(inc("k", 10), change.Change{Key: "k", Kind: change.Expire, Delta: future})
		next(change.Change{Key: "k", Kind: change.Set, Delta: 5}) // clears the expiry
		next(inc("k", 2))
		if e := read(t, s, []string{"k"}).Estimates[0]; e.Total != 7 || e.Expires != 0 {
			t.Errorf("SET 5 then +2: got %+v; want 7 with no expiry", e)
		}
		next(change.Change{Key: "k", Kind: change.Expire, Delta: time.Now().Add(-time.Second).Unix()})
		next(change.Change{Key: "k", Kind: change.Set, Delta: 5}) // of an expired key
		if e := read(t, s, []string{"k"}).Estimates[0]; e.Total != 5 || e.Expires != 0 {
			t.Errorf("SET 5 after expiry: got %+v; want 5 with no expiry", e)
		}
	}},
	{"ExactlyOnce", func(t *testing.T, s Store) {
		// A SET round retried or replayed is written once: the second
		// write would make the key n again, wiping an increment another
		// daemon committed in between.
		a, b := round("a", "", 1), round("b", "", 1)
		applyDup(t, s, b, false, inc("k", 10))
		applyDup(t, s, a, false, change.Change{Key: "k", Kind: change.Set, Delta: 3})
		b.Seq++
		applyDup(t, s, b, false, inc("k", 4))
		applyDup(t, s, a, true, change.Change{Key: "k", Kind: change.Set, Delta: 3})
		if got := totals(t, s, "k")[0]; got != 7 {
			t.Fatalf("got %d; want 7 (SET 3, then +4 from another daemon)", got)
		}
	}},
	{"UnderFold", func(t *testing.T, s Store) {
		// A SET is exact whatever the store holds the key as, while its
		// background work runs all along; other keys keep their
		// increments.
		halt := foldWhile(testContext(t), t, s)
		rng := rand.New(rand.NewPCG(3, 4))
		id := store.BatchID{Identity: store.Identity{Instance: "set"}}
		var other int64
		for i := range 60 {
			// Increments over several rounds, then a SET.
			for range 3 {
				other += 2
				id.Seq++
				apply(t, s, id, change.Change{Key: "k", Kind: change.Total, Delta: rng.Int64N(100) - 30, Var: 2}, inc("other", 2))
			}
			n := int64(i*7 - 100)
			id.Seq++
			apply(t, s, id, change.Change{Key: "k", Kind: change.Set, Delta: n})
			e := read(t, s, []string{"k"}).Estimates[0]
			if e.Total != n {
				t.Fatalf("after SET k %d (round %d): got %d; want %d", n, i, e.Total, n)
			}
			if e.Var != 0 {
				t.Fatalf("variance after SET: got %v; want 0", e.Var)
			}
		}
		if err := halt(); err != nil {
			t.Fatal(err)
		}
		if got := totals(t, s, "other")[0]; got != other {
			t.Fatalf("other key: got %d; want %d", got, other)
		}
	}},
}
