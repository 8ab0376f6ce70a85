// Package latency records durations into a fixed-size log-linear
// histogram, so a load generator can time every command without
// allocating and still report percentiles within about 1.6%.
//
// A Histogram keeps exact counts below 128 ns and, above that, 64 buckets
// per power of two: a quantile is reported as the middle of its bucket.
// Each client records into its own Histogram; Merge combines them after
// the run.
package latency

import (
	"math/bits"
	"time"
)

const (
	subBits = 6
	sub     = 1 << subBits
	// buckets covers every int64: exponents 0..63-subBits, sub each.
	buckets = (64 - subBits) * sub
)

// Histogram counts durations. The zero value is empty and ready to use;
// it is not safe for concurrent use.
type Histogram struct {
	counts [buckets]int64
	n      int64
	max    time.Duration
}

func index(v int64) int {
	if v < 2*sub {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - (subBits + 1)
	return (e+1)*sub + int(v>>e) - sub
}

// middle is the value a bucket reports: the middle of its range.
func middle(i int) int64 {
	if i < 2*sub {
		return int64(i)
	}
	e := i/sub - 1
	m := int64(i%sub + sub)
	return m<<e + (int64(1)<<e)/2
}

// Record counts one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[index(int64(d))]++
	h.n++
	if d > h.max {
		h.max = d
	}
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count is the number of durations recorded.
func (h *Histogram) Count() int64 { return h.n }

// Max is the largest duration recorded, exactly.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the duration below which a fraction q (0..1) of the
// recorded durations fall, or 0 when nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n-1)) + 1
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(middle(i)), h.max)
		}
	}
	return h.max
}
