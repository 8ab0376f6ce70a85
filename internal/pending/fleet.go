package pending

import (
	"math"
	"time"
)

// The fleet rule: a daemon that shares its database with n-1 others
// (one sidecar beside every app server) cuts its rounds at most
// rounds/n times a second, so the whole fleet writes about rounds
// transactions a second and each key popular everywhere about rounds
// slot rows a second, whatever n is. Each daemon coalesces only its own
// share of the increments; without the rule the database's work per
// increment grows with n (docs/operations.md, Running a fleet). The
// floor is capped at maxInterval, which bounds how stale counter_totals
// can be.

// fleetFloor is the shortest round for one of n live daemons aiming at
// rounds rounds a second between them, capped at hi; 0 when the rule is
// off (rounds <= 0) or n is unknown.
func fleetFloor(n int, rounds float64, hi time.Duration) time.Duration {
	if rounds <= 0 || n <= 0 {
		return 0
	}
	d := time.Duration(math.Round(float64(n) / rounds * float64(time.Second)))
	if hi > 0 {
		d = min(d, hi)
	}
	return d
}

// SetFleet tells the buffer how many daemons (itself included) write
// into its database now, from their heartbeats; its rounds lengthen to
// the fleet rule's floor (Options.FleetRounds, Options.FleetIntervalMax).
func (b *Buffer) SetFleet(n int) {
	f := b.flusher
	floor := fleetFloor(n, f.opts.FleetRounds, f.opts.FleetIntervalMax)
	if old := f.fleet.Swap(int64(n)); old != int64(n) {
		f.opts.Logger.Info("daemons on the database changed; rounds last at least the fleet's floor",
			"daemons", n, "was", old, "round_floor", floor)
	}
	f.pace.setFloor(floor)
}

// Fleet is the number of live daemons SetFleet last gave (0: not known).
func (b *Buffer) Fleet() int { return int(b.flusher.fleet.Load()) }
