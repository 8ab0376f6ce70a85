package pending

import (
	"testing"
	"time"
)

// TestStallBoundGrowsWithRound: a round may wait StallAfter plus twice
// what its size took at the last measured write rate, up to its first
// deadline, before Ready calls rounds stalled; small rounds do not set
// the rate.
func TestStallBoundGrowsWithRound(t *testing.T) {
	t.Parallel()
	b := New(nil, Options{StallAfter: 5 * time.Second, RoundTimeout: 30 * time.Second})
	f := b.flusher
	f.measured(10, time.Second) // too small to say anything per change
	if got := f.stallBound(300_000); got != 5*time.Second {
		t.Errorf("bound before a large round was measured: %v; want 5s", got)
	}
	f.measured(100_000, 2*time.Second) // 20 µs a change
	for _, c := range []struct {
		n    int
		want time.Duration
	}{
		{0, 5 * time.Second},
		{1000, 5*time.Second + 40*time.Millisecond},
		{300_000, 5*time.Second + 12*time.Second},
		{100_000_000, 5*time.Second + 4000*time.Second},
	} {
		if got := f.stallBound(c.n); got != c.want {
			t.Errorf("stallBound(%d) = %v; want %v", c.n, got, c.want)
		}
	}
	// At 100 µs a change, twice the write passes the round's first
	// deadline (30 s + 100 µs a change): the deadline caps it.
	f.measured(1000, 100*time.Millisecond)
	if got, want := f.stallBound(1_000_000), 5*time.Second+130*time.Second; got != want {
		t.Errorf("stallBound(1000000) at 100 µs a change = %v; want %v", got, want)
	}
}
