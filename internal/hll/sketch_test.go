package hll

import (
	"bytes"
	"errors"
	"testing"
)

// fill adds the hashes of the integers [from, to) and returns s.
func fill(s *Sketch, from, to int) *Sketch {
	for i := from; i < to; i++ {
		s.Add(HashInt64(int64(i)))
	}
	return s
}

func mustNew(tb testing.TB, set Settings) *Sketch {
	tb.Helper()
	s, err := New(set)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func mustBytes(tb testing.TB, s *Sketch) []byte {
	tb.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// sparseToFull is how many of the integers 0.. the default sketch takes
// before its bytes turn from SPARSE to FULL (4,312 registers set).
func sparseToFull(tb testing.TB) int {
	tb.Helper()
	s := NewDefault()
	for i := range 100_000 {
		s.Add(HashInt64(int64(i)))
		if s.Kind() == KindFull {
			return i + 1
		}
	}
	tb.Fatal("never turned FULL")
	return 0
}

func TestKindsAsSketchGrows(t *testing.T) {
	t.Parallel()
	full := sparseToFull(t)
	f := func(n int, want Kind, wantLen int) {
		t.Helper()
		s := fill(NewDefault(), 0, n)
		if s.Kind() != want {
			t.Errorf("%d members: kind %v; want %v", n, s.Kind(), want)
		}
		if b := mustBytes(t, s); len(b) != wantLen {
			t.Errorf("%d members: %d bytes; want %d", n, len(b), wantLen)
		}
	}
	f(0, KindEmpty, 3)
	f(1, KindExplicit, 3+8)
	f(1280, KindExplicit, 3+8*1280)
	s := fill(NewDefault(), 0, 1281)
	f(1281, KindSparse, 3+(s.filled*19+7)/8)
	f(full-1, KindSparse, 3+(4311*19+7)/8)
	f(full, KindFull, 3+16384*5/8)
}

func TestAddReportsChange(t *testing.T) {
	t.Parallel()
	s := NewDefault()
	f := func(h uint64, want bool) {
		t.Helper()
		if got := s.Add(h); got != want {
			t.Errorf("Add(%x) in a %v sketch = %v; want %v", h, s.Kind(), got, want)
		}
	}
	f(1, true)
	f(1, false)
	f(0, true) // the empty member's hash is 0, an element like any other
	f(0, false)
	fill(s, 0, 5000)
	f(HashInt64(1), false)
	// Index 3, rest 1<<20: value 21, then lower values change nothing.
	f(1<<(14+20)|3, true)
	f(1<<(14+20)|3, false)
	f(1<<(14+2)|3, false)
	f(3, false) // nothing above the index: no register moves
}

func TestUnionEqualsOneStream(t *testing.T) {
	t.Parallel()
	ranges := map[string][2]int{
		"empty":    {0, 0},
		"explicit": {0, 700},
		"sparse":   {300, 3000},
		"full":     {2000, 20000},
	}
	for an, a := range ranges {
		for bn, b := range ranges {
			t.Run(an+"+"+bn, func(t *testing.T) {
				t.Parallel()
				x := fill(NewDefault(), a[0], a[1])
				y := fill(NewDefault(), b[0], b[1])
				if err := x.Union(y); err != nil {
					t.Fatal(err)
				}
				one := fill(fill(NewDefault(), a[0], a[1]), b[0], b[1])
				if got, want := mustBytes(t, x), mustBytes(t, one); !bytes.Equal(got, want) {
					t.Errorf("union is %v of %d bytes; one stream is %v of %d bytes", x.Kind(), len(got), one.Kind(), len(want))
				}
				if y2 := fill(NewDefault(), b[0], b[1]); !bytes.Equal(mustBytes(t, y), mustBytes(t, y2)) {
					t.Error("Union changed its argument")
				}
			})
		}
	}
}

func TestUnionRefusesOtherSettings(t *testing.T) {
	t.Parallel()
	a := fill(NewDefault(), 0, 10)
	b := fill(mustNew(t, Settings{Log2m: 11, Regwidth: 5, Expthresh: -1, Sparse: true}), 0, 10)
	if err := a.Union(b); !errors.Is(err, ErrMismatch) {
		t.Errorf("Union of log2m 14 and 11 = %v; want ErrMismatch", err)
	}
}

func TestUndefinedAbsorbs(t *testing.T) {
	t.Parallel()
	u, err := Parse([]byte{0x10, 0x8e, 0x7f})
	if err != nil {
		t.Fatal(err)
	}
	s := fill(NewDefault(), 0, 10)
	if err := s.Union(u); err != nil {
		t.Fatal(err)
	}
	if s.Kind() != KindUndefined || s.Add(1) {
		t.Errorf("after union with UNDEFINED: kind %v; want UNDEFINED, unchanged by Add", s.Kind())
	}
	if _, ok := s.ClassicEstimate(); ok {
		t.Error("ClassicEstimate of UNDEFINED is ok; want NULL")
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	f := func(s Settings, ok bool) {
		t.Helper()
		if err := s.Validate(); (err == nil) != ok {
			t.Errorf("Validate(%+v) = %v; want ok %v", s, err, ok)
		}
	}
	f(DefaultSettings(), true)
	f(Settings{Log2m: 4, Regwidth: 1, Expthresh: 0}, true)
	f(Settings{Log2m: 16, Regwidth: 7, Expthresh: 8192}, true)
	f(Settings{Log2m: 3, Regwidth: 5, Expthresh: -1}, false)
	f(Settings{Log2m: 17, Regwidth: 5, Expthresh: -1}, false)
	f(Settings{Log2m: 14, Regwidth: 0, Expthresh: -1}, false)
	f(Settings{Log2m: 14, Regwidth: 8, Expthresh: -1}, false)
	f(Settings{Log2m: 14, Regwidth: 5, Expthresh: 100}, false)
	f(Settings{Log2m: 14, Regwidth: 5, Expthresh: 16384}, false)
	f(Settings{Log2m: 14, Regwidth: 5, Expthresh: -2}, false)
}

func TestEstimateExactWhileExplicit(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 2, 100, 1280} {
		s := fill(NewDefault(), 0, n)
		fill(s, 0, n) // repeats count once
		if got := s.Estimate(); got != uint64(n) {
			t.Errorf("Estimate of %d members = %d; want exact", n, got)
		}
		if got, _ := s.ClassicEstimate(); got != float64(n) {
			t.Errorf("ClassicEstimate of %d members = %v; want exact", n, got)
		}
	}
}
