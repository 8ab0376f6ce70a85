package hotness

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Classifier tells hot keys from cold ones. It is safe for concurrent use.
type Classifier struct {
	opts Options
	seed maphash.Seed
	sk   sketch

	mask   uint64        // Every-1: an observation is counted when rand&mask == 0
	weight uint64        // Every increments in counter units
	rnd    func() uint64 // Options.Rand, or nil for the runtime's cheap random numbers

	step     int64   // decay step, ns
	perCount float64 // counter units to increments, times 1e9 (ns to s)
	base     float64 // steady-state count/rate ratio right after a step, ns

	// HotRate, CoolRate and Target in counter units per nanosecond, so that
	// rate >= HotRate is count >= hotCount*denom: no division.
	hotCount, coolCount, targetCount float64

	// Read on every Observe, written a few times a second at most.
	// epochStart is the time counts are decayed to, a multiple of step: the
	// next decay step is due at epochStart+step.
	epochStart atomic.Int64
	index      atomic.Pointer[index] // lock-free view of entries
	floor      atomic.Uint64         // count of the coolest entry when the table is full, else 0

	clock clock // padded: its coarse time is written every resolution

	mu      sync.Mutex // guards entries; held while decaying
	entries []*entry   // the hot table, unordered
}

// New returns a Classifier configured by opts; zero fields take defaults.
// Unless opts.Now is set it starts a clock goroutine: call Close when done.
func New(opts Options) *Classifier {
	opts = opts.withDefaults()
	c := &Classifier{
		opts:    opts,
		seed:    maphash.MakeSeed(),
		sk:      newSketch(opts.Width, opts.Depth),
		step:    max(int64(opts.HalfLife)/stepsPerHalfLife, 1),
		entries: make([]*entry, 0, opts.MaxHot),
		mask:    uint64(opts.Every - 1),
		weight:  uint64(opts.Every) * one,
		rnd:     opts.Rand,
	}
	// A steady rate r leaves a count of r*(s*f/(1-f) + u) at phase u of a
	// step of length s with per-step decay f; see the package doc.
	f := math.Exp2(-float64(c.step) / float64(opts.HalfLife))
	c.base = float64(c.step) * f / (1 - f)
	c.perCount = 1e9 / one
	c.hotCount = opts.HotRate / c.perCount
	c.coolCount = opts.CoolRate / c.perCount
	c.targetCount = opts.Target / c.perCount
	c.index.Store(newIndex(nil))
	c.clock.start(opts.Now, max(time.Duration(c.step)/clockTicksPerStep, time.Millisecond))
	return c
}

// clockTicksPerStep sets the coarse clock's resolution: HalfLife/256 (3.9 ms
// by default), at least 1 ms. A reading that old changes a rate by under
// 0.3%, and the clock goroutine wakes a few hundred times a second at most.
const clockTicksPerStep = 16

// Close stops the goroutine that keeps the classifier's coarse clock. The
// classifier still works afterwards, reading the system clock on every call.
// Close is a no-op when Options.Now was set, and safe to call twice.
func (c *Classifier) Close() {
	c.clock.close()
}

// now returns the time in nanoseconds since New.
func (c *Classifier) now() int64 {
	return c.clock.now()
}

// Observe records one increment event for key and returns the sampling
// factor to use for it: 1 for a key that is not hot, and for a hot key
// N = clamp(round(rate/Target), 1, MaxN), which is N >= 2 unless the key's
// rate is below 1.5*Target. One call in Options.Every is counted, with
// weight Every; the others only look the key up in the hot table. It does
// not retain key and allocates only when a key becomes hot.
func (c *Classifier) Observe(key []byte) (n int) {
	now := c.now()
	start := c.tick(now, c.epochStart.Load(), false)
	h := maphash.Bytes(c.seed, key)
	// Rates are compared as counts against threshold*denominator, so the hot
	// path divides once, and only for a hot key.
	d := c.denom(now, start)
	e := c.index.Load().find(h)
	if !c.counted() {
		if e != nil {
			return c.factor(float64(e.count.Load()), d)
		}
		return 1
	}
	return c.count(h, key, e, now, d)
}

// Tally records one increment event for key, as Observe does, for a caller
// that has no use for the sampling factor (the key is never sampled): the
// calls Every leaves uncounted return at once, without hashing the key or
// reading the clock, so with the default Every of 4 three calls in four cost
// a random number and nothing else.
func (c *Classifier) Tally(key []byte) {
	if !c.counted() {
		return
	}
	now := c.now()
	start := c.tick(now, c.epochStart.Load(), false)
	h := maphash.Bytes(c.seed, key)
	c.count(h, key, c.index.Load().find(h), now, c.denom(now, start))
}

// counted picks the calls that are counted: one in Every, at random.
func (c *Classifier) counted() bool {
	if c.mask == 0 {
		return true
	}
	if c.rnd != nil {
		return c.rnd()&c.mask == 0
	}
	return uint64(cheaprand())&c.mask == 0
}

// count adds Every increments for the key hashed h, whose hot-table entry
// is e (nil when cold), at time now with rate denominator d, and returns
// its sampling factor.
func (c *Classifier) count(h uint64, key []byte, e *entry, now int64, d float64) int {
	if e != nil {
		v := float64(e.count.Add(c.weight))
		if v < c.coolCount*d {
			c.leave(e, now)
			return 1
		}
		return c.factor(v, d)
	}
	var idx cols
	c.sk.locate(h, &idx)
	v := c.sk.add(&idx, c.weight)
	if float64(v) < c.hotCount*d || v <= c.floor.Load() {
		return 1
	}
	return c.enter(h, key, &idx, now)
}

// Rate returns the current estimated rate of key in increments/second,
// without observing it.
func (c *Classifier) Rate(key []byte) float64 {
	now := c.now()
	c.tick(now, c.epochStart.Load(), true)
	h := maphash.Bytes(c.seed, key)
	if e := c.index.Load().find(h); e != nil {
		return c.rate(e.count.Load(), now)
	}
	var idx cols
	c.sk.locate(h, &idx)
	return c.rate(c.sk.estimate(&idx), now)
}

// Bytes returns the classifier's fixed memory footprint: the sketch, a full
// hot table and its largest index. The names of hot keys (at most MaxHot
// strings) come on top.
func (c *Classifier) Bytes() int {
	var e entry
	return int(unsafe.Sizeof(*c)) +
		len(c.sk.cells)*int(unsafe.Sizeof(c.sk.cells[0])) +
		c.opts.MaxHot*int(unsafe.Sizeof(e)+unsafe.Sizeof(&e)) +
		indexSlots(c.opts.MaxHot)*int(unsafe.Sizeof(&e))
}

// denom is what a decayed count is divided by, at time now, to give a rate
// per nanosecond: s*f/(1-f) plus the time since start, the last decay step.
func (c *Classifier) denom(now, start int64) float64 {
	return c.base + float64(max(now-start, 0))
}

// rate converts a decayed count (counter units) at time now into
// increments/second.
func (c *Classifier) rate(v uint64, now int64) float64 {
	return float64(v) * c.perCount / c.denom(now, c.epochStart.Load())
}

// factor is the sampling factor for decayed count v over denominator d:
// clamp(round(rate/Target), 1, MaxN).
func (c *Classifier) factor(v, d float64) int {
	n := v/(d*c.targetCount) + 0.5 // rounds: n > 0
	if n < 1 {
		return 1
	}
	if n >= float64(c.opts.MaxN) {
		return c.opts.MaxN
	}
	return int(n)
}

// Every returns how many observations stand for one counted one: the
// effective Options.Every.
func (c *Classifier) Every() int { return int(c.weight / one) }
