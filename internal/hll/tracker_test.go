package hll

import (
	"math/rand/v2"
	"testing"
)

// A Tracker answers every Add as a Sketch with the same settings fed the
// same hashes does: while exact, at the switch to registers and after,
// for repeats and for hash 0, with the exact form on, automatic or off;
// and Holds, asked before each Add, says it changes nothing exactly when
// the Sketch's Add says so.
func TestTrackerAnswersAsSketch(t *testing.T) {
	t.Parallel()
	f := func(name string, set Settings, distinct, adds int) {
		t.Helper()
		rng := rand.New(rand.NewPCG(uint64(distinct), uint64(adds)))
		pool := make([]uint64, distinct)
		for i := range pool {
			pool[i] = rng.Uint64()
		}
		pool[0] = 0 // the free-slot marker must still count as a member
		sk, tr := mustNew(t, set), newTracker(set)
		// ref is a tracker of the confirmed hashes alone: Confirmed must
		// answer as its Holds does, through every switch of tr's.
		ref := newTracker(set)
		changed := 0
		for i := range adds {
			h := pool[rng.IntN(distinct)]
			held := tr.Holds(h) // asked first: it must not add
			if got, want := tr.Confirmed(h), ref.Holds(h); got != want {
				t.Fatalf("%s: Confirmed before add %d (hash %#x, tracker exact %v): got %v; want %v", name, i, h, tr.regs == nil, got, want)
			}
			want := sk.Add(h)
			if held == want {
				t.Fatalf("%s: Holds before add %d (hash %#x, sketch %v): got %v; want %v", name, i, h, sk.Kind(), held, !want)
			}
			if got := tr.Add(h); got != want {
				t.Fatalf("%s: add %d (hash %#x, sketch %v): got %v; want %v", name, i, h, sk.Kind(), got, want)
			}
			if rng.IntN(3) == 0 { // a third of the adds are confirmed
				tr.Confirm(h)
				ref.Add(h)
			}
			if want {
				changed++
			}
		}
		if changed == 0 || sk.Kind() == KindExplicit && distinct > set.explicitLimit() {
			t.Fatalf("%s: the stream did not exercise the sketch (%d changes, %v)", name, changed, sk.Kind())
		}
	}
	small := Settings{Log2m: 6, Regwidth: 4, Expthresh: 16, Sparse: true}
	f("small exact only", small, 16, 200)
	f("small past exact", small, 300, 3000)
	f("no exact form", Settings{Log2m: 6, Regwidth: 4, Expthresh: 0}, 300, 3000)
	f("default exact", DefaultSettings(), 1000, 20000)
	f("default past exact", DefaultSettings(), 5000, 30000)
	f("default one at the limit", DefaultSettings(), DefaultSettings().explicitLimit()+1, 40000)
}

// A Reset sketch builds the same bytes as a new one, whatever form it
// held before (exact, registers).
func TestSketchReset(t *testing.T) {
	t.Parallel()
	s := NewDefault()
	for _, n := range []int{3000, 10, 0, 1500, 7} {
		s.Reset()
		want := fill(NewDefault(), n, 2*n+5)
		fill(s, n, 2*n+5)
		if got, wb := mustBytes(t, s), mustBytes(t, want); string(got) != string(wb) {
			t.Fatalf("after Reset, members %d..%d: got %x; want %x", n, 2*n+4, got[:min(16, len(got))], wb[:min(16, len(wb))])
		}
	}
}
