package budget

import (
	"math"
	"time"
)

const (
	// shareDivisor: a lease takes at most this fraction of the unleased
	// remainder, so leases shrink geometrically near zero and several
	// daemons each get a share.
	shareDivisor = 4
	// minLease is the smallest lease worth a round trip; below it, TAKE
	// is one conditional update.
	minLease = 4
	// maxLease caps one lease or range, so one burst cannot take a whole
	// large budget into one daemon.
	maxLease = 1 << 20
)

// want returns the size of lease (or NEXT range) to ask for: about one
// interval of recent demand (rate, units per second), at least n and at
// least minLease (so a key leases from its first TAKE); when
// the previous lease (of size prev) ran out less than an interval after it
// was taken (prevAge), twice that, so a burst ramps up in a few leases.
func want(n int64, rate float64, interval time.Duration, prev int64, prevAge time.Duration) int64 {
	w := int64(math.Ceil(rate * interval.Seconds()))
	if prev > 0 && prevAge < interval {
		w = max(w, 2*prev)
	}
	return min(max(w, n, minLease), max(maxLease, n))
}

// leaseFloor is the smallest lease that serves a TAKE of n: a lease
// smaller than it is not taken, and the TAKE goes direct.
func leaseFloor(n int64) int64 { return max(n, minLease) }

// grantable is what the lease statement grants from an unleased remainder
// for a request of w units and a floor: min(w, remainder/shareDivisor), or
// 0 when that is below the floor. The SQL computes the same (leaseSQL);
// tests check one against the other.
func grantable(remaining, w, floor int64) int64 {
	size := min(w, remaining/shareDivisor)
	if size < floor {
		return 0
	}
	return size
}

// ewma folds one interval's units into a rate, in units per second.
func ewma(rate float64, units int64, interval time.Duration) float64 {
	return 0.5*rate + 0.5*float64(units)/interval.Seconds()
}
