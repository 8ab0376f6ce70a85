package pending

import (
	"sync/atomic"
	"time"
)

// pacer sets how long a round accumulates before it is cut: Interval
// while PostgreSQL keeps up, longer (up to IntervalMax) while it is the
// bottleneck. A longer round coalesces more increments of the same key into
// one row, so PostgreSQL writes fewer rows per increment exactly when it
// has no time to spare.
//
// The signal is the duty cycle of the last write: its duration over the
// current interval. Above 1/2 (PostgreSQL is busy writing rounds at least
// half the time) the interval doubles; below 1/8 it halves. A round's write
// takes no longer when it holds fewer keys, so halving at most doubles the
// duty cycle and doubling at most halves it: from below 1/8 a halving lands
// below 1/4 and from above 1/2 a doubling lands above 1/4, never across the
// other threshold. Under a steady load the interval settles rather than
// oscillating.
type pacer struct {
	min, max time.Duration
	cur      atomic.Int64 // time.Duration; read by the metrics gauge
}

// Duty-cycle thresholds, as fractions of the current interval.
const (
	growAbove   = 2 // grow when write > interval/growAbove
	shrinkBelow = 8 // shrink when write < interval/shrinkBelow
)

// newPacer paces rounds between lo and hi; an hi below lo is lo (fixed
// rounds).
func newPacer(lo, hi time.Duration) *pacer {
	p := &pacer{min: lo, max: max(lo, hi)}
	p.cur.Store(int64(lo))
	return p
}

// interval is how long a round accumulates now.
func (p *pacer) interval() time.Duration { return time.Duration(p.cur.Load()) }

// wrote adapts the interval to a round whose write took d.
func (p *pacer) wrote(d time.Duration) {
	cur := p.interval()
	switch {
	case d > cur/growAbove:
		cur = min(2*cur, p.max)
	case d < cur/shrinkBelow:
		cur = max(cur/2, p.min)
	}
	p.cur.Store(int64(cur))
}

// idle shrinks the interval after a cut found nothing to write: with no
// load PostgreSQL is not the bottleneck.
func (p *pacer) idle() {
	p.cur.Store(int64(max(p.interval()/2, p.min)))
}

// next returns how long to wait, at now, before cutting the next round,
// given when the last one was cut. A round whose write outlasted the
// interval is followed at once.
func (p *pacer) next(lastCut, now time.Time) time.Duration {
	return max(lastCut.Add(p.interval()).Sub(now), 0)
}
