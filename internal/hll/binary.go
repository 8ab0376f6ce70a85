package hll

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The serialized form is the extension's schema version 1 (the
// hll-storage-spec): a 3-byte header, then nothing (EMPTY, UNDEFINED), the
// hashes as big-endian 8-byte integers (EXPLICIT), (index, value) chunks of
// log2m+regwidth bits for the non-zero registers in index order (SPARSE),
// or every register in regwidth bits (FULL). Bit strings are written most
// significant bit first and padded with zero bits to a whole byte.

// AppendBinary appends the bytes the extension stores for s.
func (s *Sketch) AppendBinary(dst []byte) ([]byte, error) {
	k := s.Kind()
	h := s.set.header(k)
	dst = append(dst, h[:]...)
	switch k {
	case KindExplicit:
		for _, e := range s.explicit {
			dst = binary.BigEndian.AppendUint64(dst, uint64(e))
		}
	case KindSparse:
		w := bitWriter{buf: dst}
		width := uint(s.set.Log2m + s.set.Regwidth)
		for i, v := range s.regs {
			if v != 0 {
				w.write(uint64(i)<<s.set.Regwidth|uint64(v), width)
			}
		}
		dst = w.flush()
	case KindFull:
		w := bitWriter{buf: dst}
		for _, v := range s.regs {
			w.write(uint64(v), uint(s.set.Regwidth))
		}
		dst = w.flush()
	}
	return dst, nil
}

// MarshalBinary returns the bytes the extension stores for s.
func (s *Sketch) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, s.binarySize()))
}

// binarySize is the length of s's bytes, as the extension's
// multiset_packed_size computes it.
func (s *Sketch) binarySize() int {
	switch s.Kind() {
	case KindExplicit:
		return 3 + 8*len(s.explicit)
	case KindSparse:
		return 3 + (s.filled*(s.set.Log2m+s.set.Regwidth)+7)/8
	case KindFull:
		return 3 + (s.set.registers()*s.set.Regwidth+7)/8
	}
	return 3
}

// ErrFormat wraps every reason Parse refuses bytes.
var ErrFormat = errors.New("hll: not a sketch")

// Parse reads bytes the extension stores (an hll value) with the checks
// its unpacking makes: schema version 1, a size that fits the type and
// settings, explicit hashes ascending without repeats.
func Parse(b []byte) (*Sketch, error) {
	s := new(Sketch)
	if err := s.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return s, nil
}

// UnmarshalBinary replaces s with the sketch in b; see Parse.
func (s *Sketch) UnmarshalBinary(b []byte) error {
	if len(b) < 3 {
		return fmt.Errorf("%w: %d bytes, shorter than the 3-byte header", ErrFormat, len(b))
	}
	if v := b[0] >> 4; v != 1 {
		return fmt.Errorf("%w: schema version %d, want 1", ErrFormat, v)
	}
	set, err := settingsFromHeader(b[1], b[2])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	k, body := Kind(b[0]&0xf), b[3:]
	n := Sketch{set: set, state: k}
	switch k {
	case KindEmpty, KindUndefined:
		if len(body) != 0 {
			return fmt.Errorf("%w: %v sketch with %d bytes of data", ErrFormat, k, len(body))
		}
	case KindExplicit:
		err = n.parseExplicit(body)
	case KindSparse:
		err = n.parseSparse(body)
	case KindFull:
		err = n.parseFull(body)
	default:
		err = fmt.Errorf("%w: unknown type %d", ErrFormat, k)
	}
	if err != nil {
		return err
	}
	*s = n
	return nil
}

func (s *Sketch) parseExplicit(body []byte) error {
	if len(body)%8 != 0 {
		return fmt.Errorf("%w: EXPLICIT data of %d bytes is not whole 8-byte hashes", ErrFormat, len(body))
	}
	if len(body)/8 > maxExplicit {
		return fmt.Errorf("%w: EXPLICIT sketch of %d hashes, more than %d", ErrFormat, len(body)/8, maxExplicit)
	}
	s.explicit = make([]int64, len(body)/8)
	for i := range s.explicit {
		s.explicit[i] = int64(binary.BigEndian.Uint64(body[8*i:]))
		if i > 0 && s.explicit[i] <= s.explicit[i-1] {
			return fmt.Errorf("%w: EXPLICIT hashes not ascending at %d", ErrFormat, i)
		}
	}
	return nil
}

func (s *Sketch) parseFull(body []byte) error {
	m, w := s.set.registers(), uint(s.set.Regwidth)
	if want := (m*int(w) + 7) / 8; len(body) != want {
		return fmt.Errorf("%w: FULL data of %d bytes, want %d", ErrFormat, len(body), want)
	}
	s.state = KindFull
	s.regs = make([]uint8, m)
	r := bitReader{buf: body}
	for i := range s.regs {
		s.regs[i] = uint8(r.read(w))
	}
	s.countFilled()
	return nil
}

// parseSparse reads as many whole chunks as the data holds. As in the
// extension, a later chunk for the same register overwrites an earlier one
// and the padding must be shorter than a byte.
func (s *Sketch) parseSparse(body []byte) error {
	w := uint(s.set.Regwidth)
	chunk := uint(s.set.Log2m) + w
	nbits := uint(len(body)) * 8
	n := nbits / chunk
	if pad := nbits - n*chunk; pad >= 8 {
		return fmt.Errorf("%w: SPARSE data of %d bytes leaves %d bits of padding", ErrFormat, len(body), pad)
	}
	s.state = KindFull
	s.regs = make([]uint8, s.set.registers())
	r := bitReader{buf: body}
	mask := uint64(1)<<w - 1
	for range n {
		c := r.read(chunk)
		s.regs[c>>w] = uint8(c & mask)
	}
	s.countFilled()
	return nil
}

func (s *Sketch) countFilled() {
	s.filled = 0
	for _, v := range s.regs {
		if v != 0 {
			s.filled++
		}
	}
}

// bitWriter appends values of up to 32 bits, most significant bit first,
// four bytes at a time.
type bitWriter struct {
	buf  []byte
	acc  uint64 // pending bits, right-aligned; fewer than 32 between calls
	nacc uint   // how many
}

func (w *bitWriter) write(v uint64, n uint) {
	w.acc = w.acc<<n | v
	w.nacc += n
	if w.nacc >= 32 {
		w.nacc -= 32
		w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(w.acc>>w.nacc))
	}
}

// flush pads the last byte with zero bits and returns the buffer.
func (w *bitWriter) flush() []byte {
	for w.nacc >= 8 {
		w.nacc -= 8
		w.buf = append(w.buf, byte(w.acc>>w.nacc))
	}
	if w.nacc > 0 {
		w.buf = append(w.buf, byte(w.acc<<(8-w.nacc)))
		w.nacc = 0
	}
	return w.buf
}

// bitReader reads values of up to 32 bits, most significant bit first;
// the caller never reads past the end.
type bitReader struct {
	buf  []byte
	acc  uint64
	nacc uint
}

func (r *bitReader) read(n uint) uint64 {
	if r.nacc < n && len(r.buf) >= 4 {
		r.acc = r.acc<<32 | uint64(binary.BigEndian.Uint32(r.buf))
		r.buf = r.buf[4:]
		r.nacc += 32
	}
	for r.nacc < n {
		r.acc = r.acc<<8 | uint64(r.buf[0])
		r.buf = r.buf[1:]
		r.nacc += 8
	}
	r.nacc -= n
	return r.acc >> r.nacc & (1<<n - 1)
}
