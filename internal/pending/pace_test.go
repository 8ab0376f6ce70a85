package pending

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

func TestPacer(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	// Each case starts at its interval and sees one write.
	f := func(lo, hi, cur, write, want time.Duration) {
		t.Helper()
		p := newPacer(lo, hi)
		p.cur.Store(int64(cur))
		p.wrote(write)
		if got := p.interval(); got != want {
			t.Errorf("pacer %v..%v at %v, write %v: interval %v; want %v", lo, hi, cur, write, got, want)
		}
	}
	f(100*ms, time.Second, 100*ms, 51*ms, 200*ms)       // busy over half: grow
	f(100*ms, time.Second, 100*ms, 500*ms, 200*ms)      // one doubling per round
	f(100*ms, time.Second, 800*ms, 900*ms, time.Second) // capped at the max
	f(100*ms, time.Second, time.Second, 2*time.Second, time.Second)
	f(100*ms, time.Second, 400*ms, 200*ms, 400*ms) // exactly half: hold
	f(100*ms, time.Second, 400*ms, 50*ms, 400*ms)  // exactly an eighth: hold
	f(100*ms, time.Second, 400*ms, 49*ms, 200*ms)  // under an eighth: shrink
	f(100*ms, time.Second, 150*ms, ms, 100*ms)     // not below the min
	f(100*ms, 0, 100*ms, time.Second, 100*ms)      // no max: fixed rounds
	f(100*ms, 50*ms, 100*ms, time.Second, 100*ms)  // a max below the min is the min

	p := newPacer(100*ms, time.Second)
	p.cur.Store(int64(800 * ms))
	for _, want := range []time.Duration{400 * ms, 200 * ms, 100 * ms, 100 * ms} {
		p.idle()
		if got := p.interval(); got != want {
			t.Errorf("idle: interval %v; want %v", got, want)
		}
	}

	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p = newPacer(100*ms, time.Second)
	if got := p.next(at, at.Add(30*ms)); got != 70*ms {
		t.Errorf("next 30ms after a cut: %v; want 70ms", got)
	}
	if got := p.next(at, at.Add(300*ms)); got != 0 {
		t.Errorf("next after a write that outlasted the interval: %v; want 0", got)
	}
}

// slowStore commits every round, advancing a fake clock by the write time
// it is given per key: a stand-in for PostgreSQL whose cost grows with
// the rows written.
type slowStore struct {
	now    time.Time
	perKey time.Duration
	rounds []int // keys per committed round
}

func (s *slowStore) ApplyOnce(_ context.Context, _ store.BatchID, batch []change.Change) (store.ApplyResult, error) {
	s.now = s.now.Add(time.Duration(len(batch)) * s.perKey)
	s.rounds = append(s.rounds, len(batch))
	return store.ApplyResult{}, nil
}

func (s *slowStore) Read(context.Context, []string, []store.Identity) (store.Snapshot, error) {
	return store.Snapshot{}, nil
}

func (s *slowStore) Overflows(context.Context) (int64, error) { return 0, nil }

func (s *slowStore) ReadBuckets(context.Context, string, change.Kind, int64, int64, []store.Identity) (store.BucketSnapshot, error) {
	return store.BucketSnapshot{}, nil
}

func (s *slowStore) ReadTop(context.Context, string, change.Kind, int64, int, []string, []store.Identity) (store.TopSnapshot, error) {
	return store.TopSnapshot{}, nil
}

// TestPacedRounds drives the flusher the way Run does, on a fake clock: a
// steady load of 1,000 keys per 100 ms against a store that needs 0.1 ms a
// key (100 ms per default round: PostgreSQL is the bottleneck). Rounds grow
// to the max and stay there; when the store gets fast they shrink back.
func TestPacedRounds(t *testing.T) {
	t.Parallel()
	st := &slowStore{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), perKey: 100 * time.Microsecond}
	b := New(st, Options{Interval: 100 * time.Millisecond, IntervalMax: time.Second, MaxKeys: 1 << 30})
	f := b.flusher
	f.now = func() time.Time { return st.now }
	ctx := context.Background()
	key := 0
	// run accumulates load until the next cut is due, as Run's timer
	// would, then flushes one paced round and returns its interval.
	run := func() time.Duration {
		wait := f.pace.next(f.lastCut, st.now)
		// Writes run concurrently with accepting: the load during the last
		// write and the wait both land in the next round.
		n := int((wait + st.now.Sub(f.lastCut)) / (100 * time.Microsecond))
		st.now = st.now.Add(wait)
		for range n {
			key++
			if err := b.Add(fmt.Appendf(nil, "k%d", key), 1); err != nil {
				t.Fatal(err)
			}
		}
		before := len(st.rounds)
		if err := f.flushAll(ctx, true, true); err != nil {
			t.Fatal(err)
		}
		if got := len(st.rounds) - before; n > 0 && got != 1 {
			t.Fatalf("a paced flush committed %d rounds; want 1", got)
		}
		return f.Interval()
	}
	f.lastCut = st.now.Add(-100 * time.Millisecond)
	var got []time.Duration
	for range 6 {
		got = append(got, run())
	}
	want := []time.Duration{200, 400, 800, 1000, 1000, 1000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("intervals under a slow st: %v; want %v", got, want)
	}
	st.perKey = time.Microsecond // PostgreSQL keeps up again
	got = got[:0]
	for range 6 {
		got = append(got, run())
	}
	want = []time.Duration{500, 250, 125, 100, 100, 100}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("intervals once the st is fast: %v; want %v", got, want)
	}
}

// A cut that finds nothing shrinks the interval only when the pacer's
// timer asked for it: a FLUSH right after a paced round finds nothing
// whatever PostgreSQL's load, and must not halve rounds that are long
// because the database is slow.
func TestKickedEmptyCutKeepsInterval(t *testing.T) {
	t.Parallel()
	b := New(&slowStore{}, Options{Interval: 100 * time.Millisecond, IntervalMax: time.Second})
	f := b.flusher
	for range 3 {
		f.pace.wrote(time.Second) // a slow st: 100 → 200 → 400 → 800 ms
	}
	grown := f.Interval()
	if grown <= 100*time.Millisecond {
		t.Fatalf("interval %v after slow writes; want it grown", grown)
	}
	ctx := context.Background()
	if err := f.flushAll(ctx, true, false); err != nil {
		t.Fatal(err)
	}
	if got := f.Interval(); got != grown {
		t.Errorf("interval after a kicked empty cut: %v; want %v", got, grown)
	}
	if err := f.flushAll(ctx, true, true); err != nil {
		t.Fatal(err)
	}
	if got := f.Interval(); got != grown/2 {
		t.Errorf("interval after a timed empty cut: %v; want %v", got, grown/2)
	}
}

func TestFleetFloor(t *testing.T) {
	t.Parallel()
	s := time.Second
	f := func(n int, rounds float64, hi, want time.Duration) {
		t.Helper()
		if got := fleetFloor(n, rounds, hi); got != want {
			t.Errorf("fleetFloor(%d, %v, %v) = %v; want %v", n, rounds, hi, got, want)
		}
	}
	f(1, 10, 10*s, 100*time.Millisecond)
	f(32, 10, 10*s, 3200*time.Millisecond)
	f(200, 10, 10*s, 10*s) // capped: the staleness bound wins
	f(32, 10, 0, 3200*time.Millisecond)
	f(32, 0, 10*s, 0) // the rule is off
	f(0, 10, 10*s, 0) // fleet not known yet

	// The floor lengthens rounds, the load's own interval still adapts
	// beneath it, and reason says which sets the interval.
	p := newPacer(100*time.Millisecond, s)
	if got := p.reason(); got != "base" {
		t.Errorf("reason %q; want base", got)
	}
	p.setFloor(3 * s)
	if got, r := p.interval(), p.reason(); got != 3*s || r != "fleet" {
		t.Errorf("with a 3s floor: interval %v, reason %q; want 3s, fleet", got, r)
	}
	p.wrote(2 * s) // busy: the load's interval grows to its max, under the floor
	if got, own := p.interval(), p.own(); got != 3*s || own != 200*time.Millisecond {
		t.Errorf("after a busy write: interval %v, own %v; want 3s, 200ms", got, own)
	}
	p.setFloor(0)
	if got, r := p.interval(), p.reason(); got != 200*time.Millisecond || r != "load" {
		t.Errorf("floor removed: interval %v, reason %q; want 200ms, load", got, r)
	}
}
