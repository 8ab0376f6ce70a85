package windows

import (
	"sync"
	"time"
)

// Clock is the accept clock: the wall time when it was made plus the
// monotonic time elapsed since, so a jump of the host's wall clock (NTP
// step, manual change) does not move increments into other buckets, and
// it never goes backwards.
type Clock struct {
	anchor time.Time // wall time at start; no monotonic reading
	start  time.Time // with a monotonic reading
	now    func() time.Time

	mu   sync.Mutex
	last time.Time
}

// NewClock returns a clock that reads anchor now and runs on the
// monotonic clock from there. Pass time.Now() in production; a test pins
// the daemon's buckets by passing a fixed anchor.
func NewClock(anchor time.Time) *Clock {
	return &Clock{anchor: anchor.Round(0).UTC(), start: time.Now()}
}

// FuncClock returns a clock that reads fn, never going backwards: for
// tests that step time by hand.
func FuncClock(fn func() time.Time) *Clock { return &Clock{now: fn} }

// Now returns the accept time: never before any time Now returned.
func (c *Clock) Now() time.Time {
	var t time.Time
	if c.now != nil {
		t = c.now()
	} else {
		t = c.anchor.Add(time.Since(c.start))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Before(c.last) {
		t = c.last
	}
	c.last = t
	return t
}
