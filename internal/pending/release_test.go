package pending

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
	"weak"
)

// A committed round is dropped: the queue's backing array used to keep
// committed rounds, with their maps of every key, until it was
// reallocated (after a burst, for good).
func TestCommittedRoundIsReleased(t *testing.T) {
	t.Parallel()
	st := &slowStore{now: time.Now()}
	b := New(st, Options{Interval: time.Hour})
	var rounds []weak.Pointer[round]
	for range 3 { // the queue's backing array then has room to spare
		if err := b.Add([]byte("k"), 1); err != nil {
			t.Fatal(err)
		}
		if cut, err := b.acc.Cut(); !cut || err != nil {
			t.Fatalf("Cut: %v, %v; want a round", cut, err)
		}
		q := b.flusher.queued()
		rounds = append(rounds, weak.Make(q[len(q)-1]))
	}
	if err := b.flusher.flushAll(context.Background(), false, false); err != nil {
		t.Fatal(err)
	}
	if len(st.rounds) != 3 {
		t.Fatalf("committed %d rounds; want 3", len(st.rounds))
	}
	runtime.GC()
	for i, r := range rounds {
		if r.Value() != nil {
			t.Errorf("committed round %d is still reachable", i+1)
		}
	}
	runtime.KeepAlive(b)
}

// trimStore is a slowStore that counts Trim calls.
type trimStore struct {
	slowStore
	trims int
}

func (s *trimStore) Trim(context.Context) { s.trims++ }

// After a burst of distinct keys is committed, what it took is given back:
// the next round's map is not sized for the burst (maps never shrink, so
// every later round used to start as large), the store drops what its
// connections kept, and the Go heap returns to about where it was. Not
// parallel: it measures the process's heap.
func TestBurstMemoryGivenBack(t *testing.T) {
	const keys = 200_000
	st := &trimStore{slowStore: slowStore{now: time.Now()}}
	b := New(st, Options{Interval: time.Hour, MaxKeys: 1 << 30})
	ctx := context.Background()
	names := make([][]byte, keys)
	for i := range names {
		names[i] = fmt.Appendf(nil, "burst:%d", i)
	}
	before := liveHeap()
	for _, k := range names {
		if err := b.Add(k, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.flusher.flushAll(ctx, false, false); err != nil {
		t.Fatal(err)
	}
	grown := liveHeap() - before
	t.Logf("heap after a burst of %d keys was committed: %+d bytes", keys, grown)
	if st.trims != 1 {
		t.Errorf("store trimmed %d times after the burst; want 1", st.trims)
	}
	if grown > 2<<20 {
		t.Errorf("heap grew by %d bytes after a burst of %d keys was committed; want at most 2 MiB", grown, keys)
	}
	// A small round after it does not release again.
	if err := b.Add([]byte("k"), 1); err != nil {
		t.Fatal(err)
	}
	if err := b.flusher.flushAll(ctx, false, false); err != nil {
		t.Fatal(err)
	}
	if st.trims != 1 {
		t.Errorf("store trimmed %d times after a small round; want still 1", st.trims)
	}
	runtime.KeepAlive(b)
	runtime.KeepAlive(names)
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
