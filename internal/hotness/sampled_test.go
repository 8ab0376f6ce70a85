package hotness_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/hotness"
)

// newSampled returns a classifier on a fake clock that counts one call in
// every (0: the automatic choice) picked by a PCG seeded with seed.
func newSampled(opts hotness.Options, every int, seed uint64) (*hotness.Classifier, *fakeClock) {
	opts.Every = every
	opts.Rand = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)).Uint64
	opts.Width = 1024
	clk := newFakeClock()
	opts.Now = clk.Now
	return hotness.New(opts), clk
}

// detect feeds key at rate until Observe reports it hot (N > 1, Target
// 100) and returns how long that took, or -1 after limit.
func detect(c *hotness.Classifier, clk *fakeClock, rate float64, limit time.Duration) time.Duration {
	gap := time.Duration(float64(time.Second) / rate)
	for t := gap; t <= limit; t += gap {
		clk.Advance(gap)
		if c.Observe([]byte("post:42")) > 1 {
			return t
		}
	}
	return -1
}

func TestAutoEvery(t *testing.T) {
	t.Parallel()
	f := func(opts hotness.Options, want int) {
		t.Helper()
		opts.Now = newFakeClock().Now
		if got := hotness.New(opts).Every(); got != want {
			t.Errorf("Every with %+v = %d; want %d", opts, got, want)
		}
	}
	f(hotness.Options{}, 4)                                          // 1443 events at HotRate: 4 leaves 360 counted
	f(hotness.Options{HotRate: 100}, 1)                              // 144 events: count them all
	f(hotness.Options{HotRate: 1e6}, hotness.MaxEvery)               // capped
	f(hotness.Options{HotRate: 1000, HalfLife: 4 * time.Second}, 16) // 5771 events
	f(hotness.Options{Every: 3}, 2)                                  // rounded down to a power of two
	f(hotness.Options{Every: 1}, 1)
}

// TestSampledDetectsInSameTime checks that counting one call in Every
// finds a key as soon as counting every call does, over several seeds:
// within 10% of the exact detection time (or one decay step, 62.5 ms) from
// twice HotRate up. Nearer HotRate the estimate creeps up to the threshold
// slowly, so the count's noise (6% at HotRate with Every 4) moves the moment
// more: 25% at 1.5 times HotRate.
func TestSampledDetectsInSameTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ rate, tol float64 }{
		{1500, 0.25}, {2000, 0.1}, {5000, 0.1}, {10000, 0.1}, {50000, 0.1},
	} {
		rate := tc.rate
		exact, eclk := newSampled(hotness.Options{}, 1, 0)
		want := detect(exact, eclk, rate, 10*time.Second)
		if want < 0 {
			t.Fatalf("rate %v: never hot when counting every call", rate)
		}
		for seed := range uint64(8) {
			c, clk := newSampled(hotness.Options{}, 0, seed)
			got := detect(c, clk, rate, 10*time.Second)
			slack := max(time.Duration(float64(want)*tc.tol), 62500*time.Microsecond)
			if got < want-slack || got > want+slack {
				t.Errorf("rate %v seed %d: hot after %v; want %v ± %v (every call counted)", rate, seed, got, want, slack)
			}
		}
	}
}

// TestSampledRate checks that a sampled count gives the steady rate within
// four standard deviations of the count (Every/(rate*HalfLife/ln 2) is its
// relative variance: 9.6% at 300/s, 2.4% at 5,000/s), and that keys below HotRate stay cold and keys above it stay hot for
// 20 half-lives, whatever the seed.
func TestSampledRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate float64
		hot  bool
	}{
		{300, false},
		{700, false}, // 30% below HotRate: about 5 standard deviations
		{1400, true},
		{5000, true},
		{20000, true},
	} {
		for seed := range uint64(4) {
			c, clk := newSampled(hotness.Options{}, 0, seed)
			feed(c, clk, "post:42", tc.rate, 8*time.Second)
			tol := 4 / math.Sqrt(tc.rate/math.Ln2/float64(c.Every()))
			for i := range 16 {
				feed(c, clk, "post:42", tc.rate, time.Second)
				if got := c.Rate([]byte("post:42")); !within(got, tc.rate, tol) {
					t.Fatalf("rate %v seed %d, %d s: Rate = %.1f; want ± %.1f%%", tc.rate, seed, 9+i, got, 100*tol)
				}
				if got := isHot(c, "post:42"); got != tc.hot {
					t.Fatalf("rate %v seed %d, %d s: hot = %v; want %v", tc.rate, seed, 9+i, got, tc.hot)
				}
			}
		}
	}
}

// TestTally checks that Tally counts like Observe: exactly with Every 1,
// and within 10% sampled, hot keys included.
func TestTally(t *testing.T) {
	t.Parallel()
	for _, every := range []int{1, 0} {
		c, clk := newSampled(hotness.Options{}, every, 7)
		ref, rclk := newSampled(hotness.Options{}, 1, 7)
		key := []byte("post:42")
		for range 20000 { // 5,000/s for 4 s
			clk.Advance(200 * time.Microsecond)
			rclk.Advance(200 * time.Microsecond)
			c.Tally(key)
			ref.Observe(key)
		}
		got, want := c.Rate(key), ref.Rate(key)
		tol := 0.1
		if every == 1 {
			tol = 1e-9
		}
		if !within(got, want, tol) {
			t.Errorf("Every %d: Rate after Tally = %.1f; want %.1f ± %v", c.Every(), got, want, tol)
		}
		if !isHot(c, "post:42") {
			t.Errorf("Every %d: a key tallied at 5,000/s is not hot", c.Every())
		}
	}
}

// TestSampledConcurrent runs Observe, Tally and readers at once on the
// default (sampled, runtime random numbers) classifier, for the race
// detector, and checks that a key observed from every goroutine is hot.
func TestSampledConcurrent(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	c := hotness.New(hotness.Options{Now: clk.Now, Width: 1024})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			key := []byte("post:viral")
			for i := range 20000 {
				if w == 0 && i%100 == 0 {
					clk.Advance(10 * time.Millisecond) // 2,000 calls per 10ms: 200,000/s
					c.Hot()
				}
				if w%2 == 0 {
					c.Observe(key)
				} else {
					c.Tally(key)
				}
			}
		})
	}
	wg.Wait()
	if !isHot(c, "post:viral") {
		t.Errorf("a key observed at about 200,000/s from 4 goroutines is not hot; hot: %v", c.Hot())
	}
}
