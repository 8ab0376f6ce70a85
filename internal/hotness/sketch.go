package hotness

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// fracBits is how many fractional bits a counter carries, so that decay
// (multiplying by a factor below 1) keeps precision on small counts; the
// other 48 bits hold 2.8e14 decayed increments.
const fracBits = 16

// one is a single increment in counter units.
const one = 1 << fracBits

// sketch is a count-min sketch of decayed counts with conservative update.
// Cells are only ever changed with atomic adds, so concurrent increments and
// decays never lose each other's work.
type sketch struct {
	cells []atomic.Uint64 // depth rows of width cells, row-major
	width uint64
	depth int
}

func newSketch(width, depth int) sketch {
	return sketch{
		cells: make([]atomic.Uint64, width*depth),
		width: uint64(width),
		depth: depth,
	}
}

// cols is the cell index of one key in each row.
type cols [MaxDepth]int

// locate fills idx with h's cell in each row, by double hashing
// (Kirsch–Mitzenmacher): row i uses h + i*h2, mapped onto the width by a
// multiply-shift so that any width works.
func (s *sketch) locate(h uint64, idx *cols) {
	h2 := mix(h) | 1
	x := h
	for i := range s.depth {
		col, _ := bits.Mul64(x, s.width)
		idx[i] = i*int(s.width) + int(col)
		x += h2
	}
}

// add counts w counter units for the key in idx and returns its new
// estimate. Conservative update: only the cells below estimate+1 are raised
// to it, so a collision inflates fewer cells; the loads first also let the
// depth cache misses overlap before the first locked add.
func (s *sketch) add(idx *cols, w uint64) uint64 {
	var vals [MaxDepth]uint64
	m := uint64(math.MaxUint64)
	for i := range s.depth {
		v := s.cells[idx[i]].Load()
		vals[i] = v
		m = min(m, v)
	}
	want := m + w
	est := uint64(math.MaxUint64)
	for i := range s.depth {
		v := vals[i]
		if v < want {
			// An add, not a store: increments racing with this one stay counted.
			v = s.cells[idx[i]].Add(want - v)
		}
		est = min(est, v)
	}
	return est
}

// estimate returns the decayed count of the key in idx, without counting.
func (s *sketch) estimate(idx *cols) uint64 {
	m := uint64(math.MaxUint64)
	for i := range s.depth {
		m = min(m, s.cells[idx[i]].Load())
	}
	return m
}

// raise lifts the key's cells to at least v; it gives a key leaving the hot
// table its count back.
func (s *sketch) raise(idx *cols, v uint64) {
	for i := range s.depth {
		c := &s.cells[idx[i]]
		for {
			cur := c.Load()
			if cur >= v || c.CompareAndSwap(cur, v) {
				break
			}
		}
	}
}

// decay multiplies every cell by mul/2^64.
func (s *sketch) decay(mul uint64) {
	for i := range s.cells {
		decayCell(&s.cells[i], mul)
	}
}

// decayCell multiplies one counter by mul/2^64 with an atomic add, so that
// increments landing meanwhile are kept.
func decayCell(c *atomic.Uint64, mul uint64) {
	v := c.Load()
	if v == 0 {
		return
	}
	keep, _ := bits.Mul64(v, mul)
	c.Add(^(v - keep - 1)) // subtract v-keep
}

// mix is the splitmix64 finaliser; it derives the second hash for double
// hashing.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
