package latency_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/bench/latency"
)

func TestQuantileWithinResolution(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		gen  func(r *rand.Rand) time.Duration
	}{
		{"tiny", func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(100)) }},
		{"microseconds", func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(1e6)) }},
		{"exponential", func(r *rand.Rand) time.Duration { return time.Duration(r.ExpFloat64() * 3e5) }},
		{"seconds", func(r *rand.Rand) time.Duration { return time.Duration(r.Int64N(int64(20 * time.Second))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(1, 2))
			var h latency.Histogram
			all := make([]time.Duration, 20000)
			for i := range all {
				all[i] = tc.gen(r)
				h.Record(all[i])
			}
			slices.Sort(all)
			for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
				want := all[int(q*float64(len(all)-1))]
				got := h.Quantile(q)
				if diff := float64(got - want); diff > float64(want)/60+1 || -diff > float64(want)/60+1 {
					t.Errorf("q%.2f: got %v; want %v within 1/60", q, got, want)
				}
			}
			if h.Count() != int64(len(all)) || h.Max() != all[len(all)-1] {
				t.Errorf("count %d max %v; want %d %v", h.Count(), h.Max(), len(all), all[len(all)-1])
			}
		})
	}
}

func TestMergeAndEdges(t *testing.T) {
	t.Parallel()
	var a, b latency.Histogram
	if got := a.Quantile(0.5); got != 0 {
		t.Fatalf("empty quantile: got %v; want 0", got)
	}
	a.Record(-time.Second)
	b.Record(time.Duration(1<<62 + 12345))
	a.Merge(&b)
	if a.Count() != 2 || a.Quantile(0) != 0 || a.Quantile(1) != b.Max() {
		t.Fatalf("merged: count %d q0 %v q1 %v; want 2, 0, %v", a.Count(), a.Quantile(0), a.Quantile(1), b.Max())
	}
}

func TestRecordDoesNotAllocate(t *testing.T) {
	var h latency.Histogram
	if n := testing.AllocsPerRun(1000, func() { h.Record(1234567) }); n != 0 {
		t.Fatalf("Record allocates %v times; want 0", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	var h latency.Histogram
	for i := range b.N {
		h.Record(time.Duration(i))
	}
}
