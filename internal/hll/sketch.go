package hll

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// Kind is a sketch's storage type, the low nibble of its first byte.
type Kind uint8

// The storage types of schema version 1. The extension keeps SPARSE and
// FULL sketches alike in memory and picks one when it writes bytes, so a
// Sketch does too.
const (
	KindUndefined Kind = 0 // the union of anything with it is undefined
	KindEmpty     Kind = 1
	KindExplicit  Kind = 2 // the distinct hashes themselves: exact
	KindSparse    Kind = 3 // the non-zero registers as (index, value) pairs
	KindFull      Kind = 4 // every register
)

func (k Kind) String() string {
	switch k {
	case KindUndefined:
		return "UNDEFINED"
	case KindEmpty:
		return "EMPTY"
	case KindExplicit:
		return "EXPLICIT"
	case KindSparse:
		return "SPARSE"
	case KindFull:
		return "FULL"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ErrMismatch is returned by Union for sketches whose settings differ.
var ErrMismatch = errors.New("hll: sketches have different settings")

// Sketch is a set of 64-bit hashes in the extension's model: exact while
// small (EXPLICIT), then HyperLogLog registers. It is not safe for
// concurrent use.
type Sketch struct {
	set Settings
	// state is KindUndefined, KindEmpty, KindExplicit or KindFull (any
	// register form, SPARSE or FULL on the wire).
	state Kind
	// explicit holds the hashes as signed integers in ascending order
	// without repeats, the order the extension sorts and stores them in.
	explicit []int64
	// regs has one byte per register once the sketch is probabilistic.
	regs []uint8
	// filled counts the non-zero registers, which decides SPARSE or FULL.
	filled int
}

// New returns an empty sketch with settings s.
func New(s Settings) (*Sketch, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &Sketch{set: s, state: KindEmpty}, nil
}

// NewDefault returns an empty sketch with DefaultSettings.
func NewDefault() *Sketch {
	return &Sketch{set: DefaultSettings(), state: KindEmpty}
}

// Settings returns the sketch's parameters.
func (s *Sketch) Settings() Settings { return s.set }

// Kind returns the storage type the sketch's bytes carry now.
func (s *Sketch) Kind() Kind {
	if s.state != KindFull {
		return s.state
	}
	if s.sparseSmaller() {
		return KindSparse
	}
	return KindFull
}

// sparseSmaller is the extension's choice (with hll_set_max_sparse left at
// its default -1): SPARSE while its bits are fewer than FULL's.
func (s *Sketch) sparseSmaller() bool {
	return s.set.Sparse && s.filled*(s.set.Log2m+s.set.Regwidth) < s.set.registers()*s.set.Regwidth
}

// Clone returns an independent copy.
func (s *Sketch) Clone() *Sketch {
	c := *s
	c.explicit = slices.Clone(s.explicit)
	c.regs = slices.Clone(s.regs)
	return &c
}

// Reset empties s, keeping its settings and the room of its exact form,
// so one sketch can build many in turn.
func (s *Sketch) Reset() {
	s.state, s.explicit, s.regs, s.filled = KindEmpty, s.explicit[:0], nil, 0
}

// Add adds one hash (see Hash) and reports whether the sketch changed: a
// new exact element, a register raised, or the switch from exact to
// registers. A hash whose bits above the register index are all zero
// leaves every register as it was, as in the extension.
func (s *Sketch) Add(h uint64) bool {
	switch s.state {
	case KindEmpty:
		if s.set.explicitLimit() == 0 {
			s.toRegisters()
			s.addRegister(h)
			return true
		}
		s.state = KindExplicit
		s.explicit = append(s.explicit[:0], int64(h))
		return true
	case KindExplicit:
		i, found := slices.BinarySearch(s.explicit, int64(h))
		if found {
			return false
		}
		if len(s.explicit) >= s.set.explicitLimit() {
			s.toRegisters()
			s.addRegister(h)
			return true
		}
		s.explicit = slices.Insert(s.explicit, i, int64(h))
		return true
	case KindFull:
		return s.addRegister(h)
	}
	return false // undefined stays undefined
}

// addRegister applies h to its register: the low log2m bits pick the
// register, and one plus the trailing zeros of the rest (capped at the
// register's maximum) is the value it keeps if larger.
func (s *Sketch) addRegister(h uint64) bool {
	i, v, ok := s.register(h)
	if !ok {
		return false
	}
	old := s.regs[i]
	if old >= v {
		return false
	}
	if old == 0 {
		s.filled++
	}
	s.regs[i] = v
	return true
}

// register returns the register h sets and the value it sets it to, or
// false for a hash that sets none (all its bits past the index zero).
func (s *Sketch) register(h uint64) (i uint64, v uint8, ok bool) {
	rest := h >> s.set.Log2m
	if rest == 0 {
		return 0, 0, false
	}
	v = uint8(min(bits.TrailingZeros64(rest)+1, int(s.set.maxRegister())))
	return h & uint64(s.set.registers()-1), v, true
}

// raises reports whether addRegister(h) would raise a register, without
// raising it.
func (s *Sketch) raises(h uint64) bool {
	i, v, ok := s.register(h)
	return ok && s.regs[i] < v
}

// toRegisters turns an empty or exact sketch into registers holding its
// elements.
func (s *Sketch) toRegisters() {
	elems := s.explicit
	s.state = KindFull
	s.explicit = nil
	s.regs = make([]uint8, s.set.registers())
	s.filled = 0
	for _, e := range elems {
		s.addRegister(uint64(e))
	}
}

// Union adds every hash of o to s, as hll_union does. Both must have the
// same settings; o is not changed.
func (s *Sketch) Union(o *Sketch) error {
	if s.set != o.set {
		return fmt.Errorf("%w: %+v and %+v", ErrMismatch, s.set, o.set)
	}
	switch {
	case s.state == KindUndefined || o.state == KindUndefined:
		*s = Sketch{set: s.set, state: KindUndefined}
	case o.state == KindEmpty:
	case s.state == KindEmpty:
		*s = *o.Clone()
	case o.state == KindExplicit:
		s.unionExplicit(o.explicit)
	case s.state == KindExplicit: // and o has registers
		elems := s.explicit
		*s = *o.Clone()
		for _, e := range elems {
			s.addRegister(uint64(e))
		}
	default:
		s.unionRegisters(o.regs)
	}
	return nil
}

// unionExplicit adds sorted elements the way the extension's explicit_union
// does: elements new to s are appended until the exact form is full, then
// the sketch turns to registers; an exact result is sorted once at the end.
func (s *Sketch) unionExplicit(elems []int64) {
	if s.state == KindFull {
		for _, e := range elems {
			s.addRegister(uint64(e))
		}
		return
	}
	orig := len(s.explicit)
	limit := s.set.explicitLimit()
	for _, e := range elems {
		if s.state == KindFull {
			s.addRegister(uint64(e))
			continue
		}
		if _, found := slices.BinarySearch(s.explicit[:orig], e); found {
			continue
		}
		if len(s.explicit) < limit {
			s.explicit = append(s.explicit, e)
			continue
		}
		s.toRegisters()
		s.addRegister(uint64(e))
	}
	if s.state == KindExplicit {
		slices.Sort(s.explicit)
	}
}

// unionRegisters keeps the larger of each pair of registers.
func (s *Sketch) unionRegisters(o []uint8) {
	regs := s.regs[:len(o)]
	for i, v := range o {
		if v > regs[i] {
			if regs[i] == 0 {
				s.filled++
			}
			regs[i] = v
		}
	}
}
