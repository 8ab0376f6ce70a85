package hotness_test

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/counterd/counterd/internal/hotness"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeClock is a clock that moves only when told to; safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// newT returns a classifier on a fresh fake clock. Unless opts.Width is set
// the sketch is small (1024 wide): tests about a few keys don't need more,
// and a decay pass over the default sketch is slow under the race detector.
// Unless opts.Every is set every call is counted (Every 1), so that rates
// are exact; sampled_test.go covers sampled observation.
func newT(opts hotness.Options) (*hotness.Classifier, *fakeClock) {
	clk := newFakeClock()
	opts.Now = clk.Now
	if opts.Every == 0 {
		opts.Every = 1
	}
	if opts.Width == 0 {
		opts.Width = 1024
	}
	return hotness.New(opts), clk
}

// feed observes key at rate increments/second of fake time for d, evenly
// spaced, and returns the factor the last Observe returned.
func feed(c *hotness.Classifier, clk *fakeClock, key string, rate float64, d time.Duration) int {
	gap := time.Duration(float64(time.Second) / rate)
	n := 0
	for t := time.Duration(0); t < d; t += gap {
		clk.Advance(gap)
		n = c.Observe([]byte(key))
	}
	return n
}

// within reports whether got is within frac of want.
func within(got, want, frac float64) bool {
	return got >= want*(1-frac) && got <= want*(1+frac)
}

// isHot reports whether Hot lists key.
func isHot(c *hotness.Classifier, key string) bool {
	for _, h := range c.Hot() {
		if h.Key == key {
			return true
		}
	}
	return false
}
