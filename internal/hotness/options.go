package hotness

import (
	"math"
	"math/bits"
	"time"
)

// Defaults used for zero (or out-of-range) fields of Options.
const (
	DefaultHotRate  = 1000
	DefaultTarget   = 100
	DefaultMaxN     = 1000
	DefaultHalfLife = time.Second
	DefaultMaxHot   = 1024
	// DefaultWidth keeps the collision floor of a cold key (measured at
	// about total rate/(2.5*Width) with conservative update: 242/s at 10M/s)
	// well below DefaultHotRate even at the ~10M increments/s this package
	// can absorb.
	DefaultWidth = 16384
	DefaultDepth = 4
	// MaxDepth bounds Depth so Observe can keep its row indices on the stack.
	MaxDepth = 16
	// MaxEvery caps the automatic observation sampling factor.
	MaxEvery = 64
	// minCounted is how many counted observations the automatic Every
	// leaves in the steady-state count of a key at HotRate
	// (HotRate*HalfLife/ln 2 increments): the count's relative standard
	// deviation is then at most 1/sqrt(256) = 6.25%.
	minCounted = 256
)

// Options configure a Classifier. The zero value is usable: every zero field
// takes its default.
type Options struct {
	// HotRate is the rate (increments/second) at or above which a key
	// becomes hot (default 1000).
	HotRate float64
	// CoolRate is the rate below which a hot key stops being hot (default
	// HotRate/2). The gap between the two keeps a key near the threshold
	// from flapping. A CoolRate above HotRate is lowered to HotRate.
	CoolRate float64
	// Target is the recorded rate a hot key should produce: N is chosen so
	// that rate/N is about Target (default 100).
	Target float64
	// MaxN caps the sampling factor (default 1000).
	MaxN int
	// HalfLife is the decay half-life of rate estimates (default 1s): a
	// burst shows within about a half-life and fades over a few.
	HalfLife time.Duration
	// MaxHot is the capacity of the hot-key table (default 1024).
	MaxHot int
	// Width and Depth are the sketch dimensions (defaults 16384 x 4, at
	// most MaxDepth rows). Memory is 8*Width*Depth bytes, fixed.
	Width, Depth int
	// Every counts one observation in Every, chosen at random, with
	// weight Every, so the sketch and the hot table are touched on 1/Every
	// of the calls. Rates stay unbiased and a key is detected at the same
	// time on average; a count holds about 1/Every as many events, so it
	// carries more noise. 0 picks the largest power of two (at most
	// MaxEvery) that leaves at least 256 counted events in the steady-state
	// count of a key at HotRate: 4 at the defaults. 1 counts every call.
	// Values are rounded down to a power of two.
	Every int
	// Rand returns uniform random numbers for Every's choice; nil means
	// the runtime's per-thread generator. Tests inject a seeded source.
	Rand func() uint64
	// Now is the clock; nil means time.Now (read through the monotonic
	// clock). Tests inject a fake clock.
	Now func() time.Time
}

// withDefaults returns o with every unset or out-of-range field defaulted.
func (o Options) withDefaults() Options {
	if !(o.HotRate > 0) {
		o.HotRate = DefaultHotRate
	}
	if !(o.CoolRate > 0) {
		o.CoolRate = o.HotRate / 2
	}
	o.CoolRate = min(o.CoolRate, o.HotRate)
	if !(o.Target > 0) {
		o.Target = DefaultTarget
	}
	if o.MaxN <= 0 {
		o.MaxN = DefaultMaxN
	}
	if o.HalfLife <= 0 {
		o.HalfLife = DefaultHalfLife
	}
	if o.MaxHot <= 0 {
		o.MaxHot = DefaultMaxHot
	}
	if o.Width <= 0 {
		o.Width = DefaultWidth
	}
	if o.Depth <= 0 {
		o.Depth = DefaultDepth
	}
	o.Depth = min(o.Depth, MaxDepth)
	if o.Every <= 0 {
		o.Every = autoEvery(o.HotRate, o.HalfLife)
	}
	o.Every = 1 << (bits.Len(uint(o.Every)) - 1) // a power of two: a mask picks
	return o
}

// autoEvery is the default Every: the largest power of two, at most
// MaxEvery, that leaves minCounted counted events in the steady-state count
// of a key at hotRate.
func autoEvery(hotRate float64, halfLife time.Duration) int {
	events := hotRate * halfLife.Seconds() / math.Ln2
	e := 1
	for e < MaxEvery && events/float64(2*e) >= minCounted {
		e *= 2
	}
	return e
}
