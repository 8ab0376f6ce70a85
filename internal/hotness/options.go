package hotness

import "time"

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
	return o
}
