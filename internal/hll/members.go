package hll

// Members returns hashes whose sketch, with the same settings, is s, and
// whose union with any sketch t is s ∪ t: what to add to copy s where only
// hashes can be added (counterd's PFMERGE journals a union as members).
//
// For an exact sketch they are its hashes. For one with registers, they
// are one hash per non-zero register that raises it to its value (the
// register's index in the low bits, then value-1 zero bits and a one),
// and the hashes 0 through the explicit limit, which set no register
// (nothing above the index bits) but make more distinct hashes than an
// exact sketch keeps, so any sketch they are added to switches to
// registers, as the union with s does. Nil for an empty or undefined
// sketch.
func (s *Sketch) Members() []uint64 {
	switch s.state {
	case KindExplicit:
		out := make([]uint64, len(s.explicit))
		for i, e := range s.explicit {
			out[i] = uint64(e)
		}
		return out
	case KindFull:
		pad := s.set.explicitLimit() + 1
		out := make([]uint64, 0, s.filled+pad)
		for i, v := range s.regs {
			if v > 0 {
				out = append(out, uint64(i)|1<<(uint(s.set.Log2m)+uint(v)-1))
			}
		}
		for h := range pad {
			out = append(out, uint64(h))
		}
		return out
	}
	return nil
}
