package slots

import (
	"testing"
	"time"
)

// TestSpread: a batch is split over writers (one per 2,000 keys) only
// while the store is behind, that is, when the previous write was busy at
// least nine tenths of the time since it started (rounds written back to
// back), or when someone waits on it; the first batch is split, and
// SplitAlways always splits.
func TestSpread(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	f := func(always, urgent bool, lastTook time.Duration, gap time.Duration, max, keys, want int) {
		t.Helper()
		sp := spread{always: always}
		if lastTook >= 0 {
			sp.wrote(t0, lastTook)
		}
		if got := sp.writers(max, keys, t0.Add(gap), urgent); got != want {
			t.Errorf("always %v, urgent %v, last write %v, next %v later, max %d, %d keys: got %d writers; want %d",
				always, urgent, lastTook, gap, max, keys, got, want)
		}
	}
	ms := time.Millisecond
	f(false, false, -1, 0, 2, 10000, 2)         // no write yet: behind
	f(false, false, 10*ms, 100*ms, 2, 10000, 1) // busy 10% of the time: keeps up
	f(false, false, 70*ms, 100*ms, 4, 10000, 1) // busy 70%: a paced round at 50,000 INCR/s, one writer keeps up
	f(false, false, 89*ms, 100*ms, 4, 10000, 1)
	f(false, false, 90*ms, 100*ms, 4, 10000, 4)   // busy nine tenths of the time: behind
	f(false, false, 990*ms, 1000*ms, 2, 10000, 2) // written back to back
	f(false, false, 95*ms, 100*ms, 2, 1999, 1)    // too few keys to split
	f(false, false, 95*ms, 100*ms, 4, 4000, 3)
	f(true, false, 10*ms, 100*ms, 2, 10000, 2) // SplitAlways
	f(true, false, 10*ms, 100*ms, 2, 100, 1)
	f(false, true, 10*ms, 100*ms, 2, 10000, 2) // urgent: someone waits
	f(false, true, 10*ms, 100*ms, 2, 100, 1)
}
