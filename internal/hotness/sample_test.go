package hotness

import (
	"math"
	"math/rand/v2"
	"testing"
)

// run samples events events of weight d at factor n with a seeded source
// and returns the estimated total and its estimated variance.
func run(seed uint64, events int, d int64, n int) (total int64, variance float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	for range events {
		r, v := Sample(d, n, rng.Uint64())
		total += r
		variance += v
	}
	return total, variance
}

// A million increments on a hot key land within the stated 95% bound.
func TestSampleMillionWithinBound(t *testing.T) {
	t.Parallel()
	const events, n = 1_000_000, 100
	total, variance := run(1, events, 1, n)
	bound := Error95(variance)
	if err := total - events; err < -bound || err > bound {
		t.Fatalf("estimate %d of %d: error %d outside the stated bound ±%d", total, events, err, bound)
	}
	// The estimated variance is close to the true n·d²(n-1)... per event.
	if want := float64(events) * (n - 1); math.Abs(variance-want) > 0.1*want {
		t.Fatalf("variance estimate %.0f; want about %.0f", variance, want)
	}
	t.Logf("estimate %d of %d, ±%d at 95%%", total, events, bound)
}

// Across many seeded trials the bound holds about 95% of the time and the
// estimate is unbiased.
func TestSampleCoverageAndBias(t *testing.T) {
	t.Parallel()
	trials, events := 400, 20_000
	if testing.Short() {
		trials = 200
	}
	const n, d = 50, 3
	var covered int
	var sumErr, sumSq float64
	for seed := range trials {
		total, variance := run(uint64(seed)+100, events, d, n)
		err := float64(total - int64(events)*d)
		if math.Abs(err) <= float64(Error95(variance)) {
			covered++
		}
		sumErr += err
		sumSq += err * err
	}
	coverage := float64(covered) / float64(trials)
	if coverage < 0.90 || coverage > 0.99 {
		t.Fatalf("the 95%% bound held in %.1f%% of %d trials; want about 95%%", 100*coverage, trials)
	}
	// Unbiased: the mean error is within 3 standard errors of zero.
	mean := sumErr / float64(trials)
	sd := math.Sqrt(sumSq/float64(trials) - mean*mean)
	if se := sd / math.Sqrt(float64(trials)); math.Abs(mean) > 3*se {
		t.Fatalf("mean error %.1f, standard error %.1f: biased", mean, se)
	}
	t.Logf("coverage %.1f%%, mean error %.1f (sd %.1f) over %d trials", 100*coverage, mean, sd, trials)
}

func TestSampleExactCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d       int64
		n       int
		u       uint64
		wantRec int64
		wantVar float64
	}{
		{5, 1, 0, 5, 0},                                  // not hot
		{5, 0, 0, 5, 0},                                  // no factor
		{0, 10, 0, 0, 0},                                 // INCRBY 0
		{2, 10, 0, 20, 10 * 9 * 4},                       // recorded
		{2, 10, math.MaxUint64, 0, 0},                    // sampled out
		{math.MaxInt64 / 2, 10, 0, math.MaxInt64 / 2, 0}, // n·d would overflow: exact
		{-3, 4, 0, -12, 4 * 3 * 9},                       // an unlike
	}
	for _, tt := range tests {
		rec, v := Sample(tt.d, tt.n, tt.u)
		if rec != tt.wantRec || v != tt.wantVar {
			t.Errorf("Sample(%d, %d, %#x): got %d, %g; want %d, %g", tt.d, tt.n, tt.u, rec, v, tt.wantRec, tt.wantVar)
		}
	}
}

func BenchmarkSample(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var sink int64
	for b.Loop() {
		r, _ := Sample(1, 100, rng.Uint64())
		sink += r
	}
	_ = sink
}
