package hotness

import "math"

// Sample applies a probabilistic increment: an event of weight d on a key
// with sampling factor n is recorded as n·d with probability 1/n and
// otherwise not at all, so the expected recorded amount is d. u is a
// uniform random 64-bit number.
//
// It returns the amount to record (0 when sampled out) and the variance
// estimate the recorded amount carries. An event's variance is
// d²(n-1); attaching n·d²(n-1) to each recorded event, and 0 to the ones
// left out, makes the sum of attached variances an unbiased estimate of
// the total variance using only what is recorded, so nothing needs to be
// kept for increments that are not written. An n ≤ 1, or an n·d that
// would overflow int64, records d exactly.
func Sample(d int64, n int, u uint64) (recorded int64, variance float64) {
	if n <= 1 || d == 0 {
		return d, 0
	}
	nd := int64(n) * d
	if nd/int64(n) != d {
		return d, 0
	}
	// The top 53 bits of u as a float in [0, 1).
	if float64(u>>11)*(1.0/(1<<53)) >= 1/float64(n) {
		return 0, 0
	}
	fd := float64(d)
	return nd, float64(n) * float64(n-1) * fd * fd
}

// Error95 is the half-width of the 95% confidence interval of a sampled
// total with the given variance: 1.96 standard deviations, rounded up.
func Error95(variance float64) int64 {
	if variance <= 0 {
		return 0
	}
	return int64(math.Ceil(1.96 * math.Sqrt(variance)))
}
