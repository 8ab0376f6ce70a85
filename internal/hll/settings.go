package hll

import (
	"fmt"
	"math/bits"
)

// Settings are the four parameters every sketch carries in its header; two
// sketches union only when all four are equal (the extension refuses
// otherwise).
type Settings struct {
	// Log2m is log2 of the number of registers (4 to 16).
	Log2m int
	// Regwidth is the bits per register (1 to 7).
	Regwidth int
	// Expthresh is how many distinct hashes the exact (EXPLICIT) form
	// holds before it turns probabilistic: -1 picks the number that takes
	// the same bytes as the FULL form, 0 skips the exact form, else a
	// power of two up to 8192.
	Expthresh int64
	// Sparse lets a probabilistic sketch be stored as SPARSE while that is
	// smaller than FULL.
	Sparse bool
}

// DefaultSettings returns counterd's settings: 2^14 registers of 5 bits,
// exact up to 1,280 members, sparse on. The package doc argues for them;
// in SQL they are hll(14, 5, -1, 1), and hll_add_agg needs them spelled
// out, hll_add_agg(h, 14, 5, -1, 1), because the extension's own default
// log2m is 11. A function, not a variable, so no caller can change them
// for every other.
func DefaultSettings() Settings {
	return Settings{Log2m: 14, Regwidth: 5, Expthresh: -1, Sparse: true}
}

// Limits the extension places on the parameters (check_modifiers); log2m
// starts at 4 because its estimator refuses 8 registers or fewer.
const (
	minLog2m       = 4
	maxLog2m       = 16
	maxRegwidth    = 7
	maxExpthresh   = 8192
	autoExpthresh  = -1
	encodedAutoExp = 63
	// maxExplicit is how many elements the extension's in-memory explicit
	// array holds (128 KiB less its length word, in 8-byte elements).
	maxExplicit = (128*1024 - 8) / 8
)

// Validate reports the first parameter outside what the extension accepts.
func (s Settings) Validate() error {
	if err := s.validateShape(); err != nil {
		return err
	}
	e := s.Expthresh
	if e < autoExpthresh || e > maxExpthresh || (e > 0 && e&(e-1) != 0) {
		return fmt.Errorf("hll: expthresh %d is not -1, 0 or a power of two up to %d", e, maxExpthresh)
	}
	return nil
}

// validateShape checks log2m and regwidth, the parameters a parsed header
// must get right; its expthresh may be any value a header can encode.
func (s Settings) validateShape() error {
	if s.Log2m < minLog2m || s.Log2m > maxLog2m {
		return fmt.Errorf("hll: log2m %d outside %d..%d", s.Log2m, minLog2m, maxLog2m)
	}
	if s.Regwidth < 1 || s.Regwidth > maxRegwidth {
		return fmt.Errorf("hll: regwidth %d outside 1..%d", s.Regwidth, maxRegwidth)
	}
	return nil
}

// registers is m, the number of registers.
func (s Settings) registers() int { return 1 << s.Log2m }

// maxRegister is the largest register value, 2^regwidth - 1.
func (s Settings) maxRegister() uint8 { return uint8(1)<<s.Regwidth - 1 }

// explicitLimit is how many elements the EXPLICIT form holds (the
// extension's expthresh_value, capped at its array size as its newer
// releases do for headers that claim more).
func (s Settings) explicitLimit() int {
	if s.Expthresh == autoExpthresh {
		return (s.Regwidth*s.registers() + 7) / 8 / 8
	}
	return int(min(s.Expthresh, maxExplicit))
}

// header is the three bytes that start every serialized sketch: version
// and type, then regwidth-1 and log2m, then the sparse flag and the
// encoded expthresh.
func (s Settings) header(k Kind) [3]byte {
	var exp byte
	switch {
	case s.Expthresh == autoExpthresh:
		exp = encodedAutoExp
	case s.Expthresh > 0:
		exp = byte(bits.Len64(uint64(s.Expthresh))) // log2 + 1
	}
	if s.Sparse {
		exp |= 1 << 6
	}
	return [3]byte{1<<4 | byte(k), byte(s.Regwidth-1)<<5 | byte(s.Log2m), exp}
}

// settingsFromHeader decodes bytes 1 and 2 of a header. Expthresh may be
// any value a header can say (up to 2^61); explicitLimit caps its use.
// Bit 7 of byte 2 is unused, and ignored as the extension ignores it.
func settingsFromHeader(b1, b2 byte) (Settings, error) {
	s := Settings{Log2m: int(b1 & 0x1f), Regwidth: int(b1>>5) + 1, Sparse: b2>>6&1 == 1}
	switch e := b2 & 0x3f; e {
	case encodedAutoExp:
		s.Expthresh = autoExpthresh
	case 0:
	default:
		s.Expthresh = 1 << (e - 1)
	}
	return s, s.validateShape()
}
