package hll

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// testSettings are the default and a few others that take every branch:
// the extension's own default log2m, no exact form, sparse off, a small
// explicit threshold, narrow registers.
var testSettings = []Settings{
	DefaultSettings(),
	{Log2m: 11, Regwidth: 5, Expthresh: -1, Sparse: true},
	{Log2m: 14, Regwidth: 5, Expthresh: 0, Sparse: true},
	{Log2m: 14, Regwidth: 5, Expthresh: -1, Sparse: false},
	{Log2m: 12, Regwidth: 6, Expthresh: 16, Sparse: true},
	{Log2m: 10, Regwidth: 4, Expthresh: 256, Sparse: false},
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, set := range testSettings {
		for _, n := range []int{0, 1, 17, 300, 1500, 5000, 40000} {
			s := fill(mustNew(t, set), 0, n)
			b := mustBytes(t, s)
			p, err := Parse(b)
			if err != nil {
				t.Fatalf("%+v, %d members: Parse: %v", set, n, err)
			}
			if got := mustBytes(t, p); !bytes.Equal(got, b) {
				t.Errorf("%+v, %d members (%v): bytes change through Parse", set, n, s.Kind())
			}
			if p.Estimate() != s.Estimate() || p.Kind() != s.Kind() || p.filled != s.filled {
				t.Errorf("%+v, %d members: parsed sketch differs", set, n)
			}
			// A parsed sketch keeps growing like the original.
			if !bytes.Equal(mustBytes(t, fill(p, n, n+100)), mustBytes(t, fill(s, n, n+100))) {
				t.Errorf("%+v, %d members: adding after Parse differs", set, n)
			}
		}
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	f := func(hexBytes, why string) {
		t.Helper()
		b, err := hex.DecodeString(hexBytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(b); !errors.Is(err, ErrFormat) {
			t.Errorf("Parse(%s) (%s) = %v; want ErrFormat", hexBytes, why, err)
		}
	}
	f("", "no header")
	f("118e", "short header")
	f("218e7f", "schema version 2")
	f("158e7f", "type 5")
	f("118e7f00", "EMPTY with data")
	f("108e7f00", "UNDEFINED with data")
	f("128e7f00", "EXPLICIT data not whole hashes")
	f("128e7f00000000000000020000000000000001", "EXPLICIT descending")
	f("128e7f00000000000000010000000000000001", "EXPLICIT repeated")
	f("128e7f00000000000000018000000000000000", "EXPLICIT in unsigned order; the extension sorts signed")
	f("148e7f00", "FULL too short")
	f("138e7f0000", "SPARSE leaving 16 bits of padding with 19-bit chunks")
	f("11837f", "log2m 3")
	f("11917f", "log2m 17")
	f("11ee7f", "regwidth 8")
}

func TestParseAcceptsWhatTheExtensionDoes(t *testing.T) {
	t.Parallel()
	f := func(hexBytes string, kind Kind, n uint64) {
		t.Helper()
		b, _ := hex.DecodeString(hexBytes)
		s, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(%s): %v", hexBytes, err)
		}
		if s.Kind() != kind || s.Estimate() != n {
			t.Errorf("Parse(%s): %v estimating %d; want %v estimating %d", hexBytes, s.Kind(), s.Estimate(), kind, n)
		}
	}
	f("118e7f", KindEmpty, 0)
	f("108e7f", KindUndefined, 0)
	f("128e7f", KindExplicit, 0) // no elements
	f("128e7f8000000000000000ffffffffffffffff0000000000000001", KindExplicit, 3)
	f("138e7f", KindSparse, 0) // registers, none set
	// The extension's answer for hashes of the integers 1, 2, 3.
	f("128e7f8895a3f5af28cafeda0ce907e4355b604848de7f7bd2a13b", KindExplicit, 3)
}

// FuzzParse: Parse never panics, and what it accepts serializes to bytes
// that parse back to the same bytes (one normalization at most: padding
// bits, sparse chunks out of order or repeated, a sparse set FULL is
// smaller for).
func FuzzParse(f *testing.F) {
	for _, set := range testSettings[:3] {
		for _, n := range []int{0, 3, 2000, 6000} {
			f.Add(mustBytes(f, fill(mustNew(f, set), 0, n)))
		}
	}
	f.Add([]byte{0x10, 0x8e, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		once := mustBytes(t, s)
		p, err := Parse(once)
		if err != nil {
			t.Fatalf("Parse of serialized %x: %v", once, err)
		}
		if twice := mustBytes(t, p); !bytes.Equal(once, twice) {
			t.Fatalf("not stable: %x then %x", once, twice)
		}
		_ = s.Estimate()
		_, _ = s.ClassicEstimate()
	})
}
