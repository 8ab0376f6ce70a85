package storetest

import (
	"slices"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// A round applied twice (a retry after a lost commit acknowledgement, or
// a journal replayed after a crash) counts once, in every lane; a round
// older than the last one committed is skipped; another instance, or a
// new generation of the same instance, is a round of its own.
var exactlyOnce = []subtest{
	{"SameRoundTwice", func(t *testing.T, s Store) {
		keys := laneKeys("once:", 1)
		var batch []change.Change
		want := map[string]int64{}
		for l, k := range keys {
			batch = append(batch, inc(k[0], int64(l+1)))
			want[k[0]] = int64(l + 1)
		}
		id := round("a", "g1", 1)
		applyDup(t, s, id, false, batch...)
		applyDup(t, s, id, true, batch...)
		wantTotals(t, s, want)
		if m := marks(t, s, id.Identity); m != fill(1) {
			t.Errorf("watermarks: got %v; want 1 in every lane", m)
		}
	}},
	{"LowerSeqSkipped", func(t *testing.T, s Store) {
		a := func(seq uint64) store.BatchID { return round("a", "", seq) }
		applyDup(t, s, a(1), false, inc("post:1", 5))
		applyDup(t, s, a(1), true, inc("post:1", 5)) // the same round again
		applyDup(t, s, round("b", "", 1), false, inc("post:1", 7))
		applyDup(t, s, a(3), false, inc("post:1", 11))
		applyDup(t, s, a(2), true, inc("post:1", 100)) // older than the last committed
		if got := totals(t, s, "post:1")[0]; got != 23 {
			t.Fatalf("total: got %d; want 23 (5 + 7 + 11)", got)
		}
		if m := marks(t, s, a(0).Identity); m.Min() != 3 {
			t.Fatalf("lowest watermark of a: got %d (%v); want 3", m.Min(), m)
		}
	}},
	{"EmptyRound", func(t *testing.T, s Store) {
		// A round whose changes all netted to nothing (INCR k then DECR
		// k) writes no change, but is a round all the same: its lanes
		// record it, so reads stop adding it and rounds after it follow.
		id := round("e", "g1", 1)
		applyDup(t, s, id, false)
		if m := marks(t, s, id.Identity); m != fill(1) {
			t.Errorf("watermarks after an empty round: got %v; want 1 in every lane", m)
		}
		applyDup(t, s, id, true)
		applyDup(t, s, round("e", "g1", 2), false, inc("e:1", 4))
		if got := totals(t, s, "e:1")[0]; got != 4 {
			t.Fatalf("total after the round following an empty one: got %d; want 4", got)
		}
	}},
	{"NewGeneration", func(t *testing.T, s Store) {
		// A journal restored from a snapshot starts a new generation at
		// seq 1: its rounds are not below the old generation's mark.
		applyDup(t, s, round("a", "g1", 9), false, inc("k", 1))
		applyDup(t, s, round("a", "g2", 1), false, inc("k", 10))
		applyDup(t, s, round("a", "", 1), false, inc("k", 100))
		applyDup(t, s, round("a", "g2", 1), true, inc("k", 10))
		if got := totals(t, s, "k")[0]; got != 111 {
			t.Fatalf("total: got %d; want 111", got)
		}
		snap := read(t, s, nil, round("a", "g1", 0).Identity, round("a", "g2", 0).Identity, round("z", "g1", 0).Identity)
		for i, want := range []uint64{9, 1, 0} {
			if got := snap.Marks[i].Min(); got != want || snap.Marks[i] != fill(want) {
				t.Errorf("watermarks of identity %d: got %v; want %d in every lane", i, snap.Marks[i], want)
			}
		}
	}},
}

// Rounds re-applied after some of their lanes committed (a crash, or a
// failed transaction of ApplyOnce) write only what is missing, of every
// kind, and then count as a duplicate.
var replay = []subtest{
	{"AfterPartialCommit", func(t *testing.T, s Store) {
		keys := laneKeys("r:", 3)
		// Round seq adds seq to a total and a bucket in every lane, and
		// with set, SETs a third key to 10 seq.
		batch := func(seq uint64, set bool) []change.Change {
			var b []change.Change
			for l := range store.Lanes {
				b = append(b, inc(keys[l][0], int64(seq)),
					change.Change{Key: keys[l][1], Kind: change.Minute, Bucket: t0, Delta: int64(seq)})
				if set {
					b = append(b, change.Change{Key: keys[l][2], Kind: change.Set, Delta: int64(seq) * 10})
				}
			}
			return b
		}
		for seq := uint64(1); seq <= 4; seq++ {
			apply(t, s, round("x", "g", seq), batch(seq, true)...)
		}
		// Round 5 committed lanes 3 and 8 only, round 6 (with SETs) lanes
		// 0 and 15 only; each is replayed whole.
		for _, r := range []struct {
			seq   uint64
			set   bool
			lanes []int
		}{{5, false, []int{3, 8}}, {6, true, []int{0, 15}}} {
			id := round("x", "g", r.seq)
			if err := s.CommitLanes(testContext(t), id, batch(r.seq, r.set), r.lanes); err != nil {
				t.Fatal(err)
			}
			for l, seq := range marks(t, s, id.Identity) {
				want := r.seq - 1
				if slices.Contains(r.lanes, l) {
					want = r.seq
				}
				if seq != want {
					t.Fatalf("lane %d before the replay of round %d: watermark %d; want %d", l, r.seq, seq, want)
				}
			}
			applyDup(t, s, id, false, batch(r.seq, r.set)...)
			applyDup(t, s, id, true, batch(r.seq, r.set)...)
			if m := marks(t, s, id.Identity); m != fill(r.seq) {
				t.Errorf("watermarks after the replay: got %v; want %d in every lane", m, r.seq)
			}
		}
		want := map[string]int64{}
		for l := range store.Lanes {
			want[keys[l][0]] = 1 + 2 + 3 + 4 + 5 + 6
			want[keys[l][2]] = 60
		}
		wantTotals(t, s, want)
		for l := range store.Lanes {
			b := readBuckets(t, s, keys[l][1], change.Minute, t0, t0)
			if len(b.Buckets) != 1 || b.Buckets[0].Total != 21 {
				t.Errorf("%s minute bucket: got %v; want 21", keys[l][1], b.Buckets)
			}
		}
	}},
}

// fill returns marks of seq in every lane.
func fill(seq uint64) store.Marks {
	var m store.Marks
	for l := range m {
		m[l] = seq
	}
	return m
}
