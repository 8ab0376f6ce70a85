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
//
// A daemon that is one of a fleet sharing the database also keeps its
// rounds at least as long as the fleet rule says (fleet.go): the floor.
type pacer struct {
	min, max time.Duration
	cur      atomic.Int64 // time.Duration; read by the metrics gauge
	floor    atomic.Int64 // time.Duration: the fleet's shortest round; 0 for none
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

// interval is how long a round accumulates now: the load's interval, or
// the fleet's floor when that is longer.
func (p *pacer) interval() time.Duration {
	return max(time.Duration(p.cur.Load()), time.Duration(p.floor.Load()))
}

// own is the interval the load alone sets.
func (p *pacer) own() time.Duration { return time.Duration(p.cur.Load()) }

// setFloor keeps rounds at least d long (0: no floor).
func (p *pacer) setFloor(d time.Duration) { p.floor.Store(int64(d)) }

// reason says what sets the interval now: "fleet" (the floor), "load"
// (PostgreSQL busy writing rounds) or "base" (COUNTERD_FLUSH_INTERVAL).
func (p *pacer) reason() string {
	switch cur := p.own(); {
	case time.Duration(p.floor.Load()) > cur:
		return "fleet"
	case cur > p.min:
		return "load"
	default:
		return "base"
	}
}

// wrote adapts the interval to a round whose write took d.
func (p *pacer) wrote(d time.Duration) {
	cur := p.own()
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
	p.cur.Store(int64(max(p.own()/2, p.min)))
}

// next returns how long to wait, at now, before cutting the next round,
// given when the last one was cut. A round whose write outlasted the
// interval is followed at once.
func (p *pacer) next(lastCut, now time.Time) time.Duration {
	return max(lastCut.Add(p.interval()).Sub(now), 0)
}
