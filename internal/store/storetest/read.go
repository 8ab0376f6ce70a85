package storetest

import (
	"sync"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// A caller holding rounds in memory reads the store and adds each round
// it holds to a key only if the round's seq is above the watermark of the
// key's lane that the same read returned: the sum is exact, whichever
// rounds have committed, in which lanes, and while rounds commit.
var readWithPending = []subtest{
	{"Totals", func(t *testing.T, s Store) {
		x := round("x", "g", 0).Identity
		keys, rounds := pendingRounds(t, s, x, change.Total)
		names := make([]string, 0, store.Lanes)
		for _, k := range keys {
			names = append(names, k[0])
		}
		snap := read(t, s, names, x, round("never", "g", 0).Identity)
		if snap.Marks[1] != fill(0) {
			t.Errorf("watermarks of an identity never written: %v; want 0", snap.Marks[1])
		}
		for i, key := range names {
			got := snap.Estimates[i].Total + held(rounds, key, snap.MarksOf(i)[0])
			if want := wantPending(rounds, key); got != want {
				t.Errorf("%s: stored %d plus held rounds above watermark %d = %d; want %d",
					key, snap.Estimates[i].Total, snap.MarksOf(i)[0][store.LaneOf(key)], got, want)
			}
		}
	}},
	{"Buckets", func(t *testing.T, s Store) {
		x := round("x", "g", 0).Identity
		keys, rounds := pendingRounds(t, s, x, change.Hour)
		for _, k := range keys {
			snap := readBuckets(t, s, k[0], change.Hour, t0, t0, x)
			var stored int64
			for _, b := range snap.Buckets {
				stored += b.Total
			}
			if got, want := stored+held(rounds, k[0], snap.Marks[0]), wantPending(rounds, k[0]); got != want {
				t.Errorf("%s: stored %d plus held rounds above watermark %d = %d; want %d",
					k[0], stored, snap.Marks[0][store.LaneOf(k[0])], got, want)
			}
		}
	}},
	{"Top", func(t *testing.T, s Store) {
		x := round("x", "g", 0).Identity
		keys, rounds := pendingRounds(t, s, x, change.Hour)
		names := make([]string, 0, store.Lanes)
		for _, k := range keys {
			names = append(names, k[0])
		}
		snap := readTop(t, s, "p:", change.Hour, t0, store.Lanes, names, x)
		top := map[string]int64{}
		for _, kt := range snap.Top {
			top[kt.Key] = kt.Total
		}
		for i, key := range names {
			want := wantPending(rounds, key)
			if got := snap.Keys[i] + held(rounds, key, snap.MarksOf(i)[0]); got != want {
				t.Errorf("%s: stored %d plus held rounds above watermark %d = %d; want %d",
					key, snap.Keys[i], snap.MarksOf(i)[0][store.LaneOf(key)], got, want)
			}
			if got := top[key] + held(rounds, key, snap.MarksOf(i)[0]); got != want {
				t.Errorf("%s in the top list: stored %d plus held rounds = %d; want %d", key, top[key], got, want)
			}
		}
	}},
	{"WhileRoundsCommit", func(t *testing.T, s Store) {
		// A writer commits 40 rounds one after another while a reader
		// reads; every read plus the rounds above its watermarks is the
		// sum of all 40.
		x := round("x", "g", 0).Identity
		keys := laneKeys("w:", 1)
		names := make([]string, store.Lanes)
		var rounds []heldRound
		for seq := uint64(1); seq <= 40; seq++ {
			r := heldRound{seq: seq}
			for l := range store.Lanes {
				names[l] = keys[l][0]
				r.changes = append(r.changes, inc(keys[l][0], int64(seq*uint64(l+1))))
			}
			rounds = append(rounds, r)
		}
		// The reader reads back to back, so reads and commits overlap.
		done := make(chan struct{})
		var wg sync.WaitGroup
		t.Cleanup(wg.Wait) // after a failed read too
		ctx := testContext(t)
		wg.Go(func() {
			defer close(done)
			for _, r := range rounds {
				if _, err := s.ApplyOnce(ctx, store.BatchID{Identity: x, Seq: r.seq}, r.changes); err != nil {
					if ctx.Err() == nil { // not a read's failure ending the test
						t.Errorf("round %d: %v", r.seq, err)
					}
					return
				}
			}
		})
		reads := 0
		for stop := false; !stop; reads++ {
			select {
			case <-done:
				stop = true // one more read, after the last commit
			default:
			}
			snap, err := s.Read(ctx, names, []store.Identity{x})
			if err != nil {
				t.Fatal(err)
			}
			for i, key := range names {
				if got, want := snap.Estimates[i].Total+held(rounds, key, snap.MarksOf(i)[0]), wantPending(rounds, key); got != want {
					t.Fatalf("read %d, %s: stored %d plus held rounds above watermark %d = %d; want %d",
						reads, key, snap.Estimates[i].Total, snap.MarksOf(i)[0][store.LaneOf(key)], got, want)
				}
			}
		}
		t.Logf("%d reads while 40 rounds committed", reads)
	}},
}

// heldRound is a round a caller holds in memory.
type heldRound struct {
	seq     uint64
	changes []change.Change
}

// pendingRounds writes rounds 1..3 of x whole, round 4 in the even lanes
// only (the rest of it failed), and holds round 5; each round adds to one
// key per lane (prefix "p:") a change of kind k (in bucket t0). It
// returns the keys and the five rounds, which a caller holding all five
// in memory would add.
func pendingRounds(t *testing.T, s Store, x store.Identity, k change.Kind) ([store.Lanes][]string, []heldRound) {
	t.Helper()
	keys := laneKeys("p:", 1)
	var rounds []heldRound
	for seq := uint64(1); seq <= 5; seq++ {
		r := heldRound{seq: seq}
		for l := range store.Lanes {
			c := change.Change{Key: keys[l][0], Kind: k, Delta: int64(seq*100 + uint64(l))}
			if k.Windowed() {
				c.Bucket = t0
			}
			r.changes = append(r.changes, c)
		}
		rounds = append(rounds, r)
	}
	for _, r := range rounds[:3] {
		apply(t, s, store.BatchID{Identity: x, Seq: r.seq}, r.changes...)
	}
	var even []int
	for l := 0; l < store.Lanes; l += 2 {
		even = append(even, l)
	}
	if err := s.CommitLanes(testContext(t), store.BatchID{Identity: x, Seq: 4}, rounds[3].changes, even); err != nil {
		t.Fatal(err)
	}
	m := marks(t, s, x)
	for l := range store.Lanes {
		if want := uint64(3 + (l+1)%2); m[l] != want {
			t.Fatalf("lane %d: watermark %d; want %d", l, m[l], want)
		}
	}
	return keys, rounds
}

// held is what a caller adds to key's stored value: the deltas of the
// rounds it holds above the watermark of key's lane.
func held(rounds []heldRound, key string, m store.Marks) int64 {
	var n int64
	for _, r := range rounds {
		if r.seq > m[store.LaneOf(key)] {
			n += sumOf(r.changes, key)
		}
	}
	return n
}

// wantPending is the sum of key's deltas over every round.
func wantPending(rounds []heldRound, key string) int64 {
	var n int64
	for _, r := range rounds {
		n += sumOf(r.changes, key)
	}
	return n
}

func sumOf(cs []change.Change, key string) int64 {
	var n int64
	for _, c := range cs {
		if c.Key == key {
			n += c.Delta
		}
	}
	return n
}
