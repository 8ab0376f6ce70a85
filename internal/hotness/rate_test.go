package hotness_test

import (
	"testing"
	"time"

	"github.com/counterd/counterd/internal/hotness"
)

func TestRateSteady(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		rate     float64
		halfLife time.Duration
	}{
		{"cold", 50, time.Second},
		{"below-hot", 700, time.Second},
		{"hot", 5000, time.Second},
		{"very-hot", 50000, time.Second},
		{"odd", 3333, time.Second},
		{"short-half-life", 5000, 100 * time.Millisecond},
		{"long-half-life", 2000, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, clk := newT(hotness.Options{HalfLife: tc.halfLife})
			feed(c, clk, "post:42", tc.rate, 8*tc.halfLife)
			// Sample across a whole half-life: the estimate must not saw-tooth
			// with the decay steps.
			for i := range 10 {
				feed(c, clk, "post:42", tc.rate, tc.halfLife/10)
				if got := c.Rate([]byte("post:42")); !within(got, tc.rate, 0.02) {
					t.Fatalf("sample %d: Rate = %.1f; want %.1f ± 2%%", i, got, tc.rate)
				}
			}
		})
	}
}

func TestRateUnknownKey(t *testing.T) {
	t.Parallel()
	c, clk := newT(hotness.Options{})
	feed(c, clk, "post:1", 500, 3*time.Second)
	if got := c.Rate([]byte("post:2")); got != 0 {
		t.Errorf("Rate of an unseen key = %v; want 0", got)
	}
}

func TestFactorAdapts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts hotness.Options
		rate float64
		want int
	}{
		{"10k-target-100", hotness.Options{}, 10000, 100},
		{"2k-target-100", hotness.Options{}, 2000, 20},
		{"capped", hotness.Options{MaxN: 20}, 10000, 20},
		{"default-cap", hotness.Options{Target: 1}, 50000, 1000},
		{"target-above-rate", hotness.Options{Target: 1500}, 1200, 1},
		{"cold", hotness.Options{}, 400, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, clk := newT(tc.opts)
			got := feed(c, clk, "post:42", tc.rate, 10*time.Second)
			if !within(float64(got), float64(tc.want), 0.05) {
				t.Errorf("N = %d; want %d ± 5%%", got, tc.want)
			}
		})
	}
}

func TestFactorFollowsRate(t *testing.T) {
	t.Parallel()
	c, clk := newT(hotness.Options{})
	if got := feed(c, clk, "post:42", 10000, 8*time.Second); !within(float64(got), 100, 0.05) {
		t.Fatalf("N at 10k/s = %d; want 100 ± 5%%", got)
	}
	if got := feed(c, clk, "post:42", 3000, 8*time.Second); !within(float64(got), 30, 0.05) {
		t.Fatalf("N after slowing to 3k/s = %d; want 30 ± 5%%", got)
	}
	if got := feed(c, clk, "post:42", 20000, 8*time.Second); !within(float64(got), 200, 0.05) {
		t.Fatalf("N after speeding to 20k/s = %d; want 200 ± 5%%", got)
	}
}
