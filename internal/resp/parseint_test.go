package resp

import (
	"math"
	"strconv"
	"testing"
)

func TestParseInt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		want   int64
		wantOK bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"-1", -1, true},
		{"42", 42, true},
		{"1000000", 1000000, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true},
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"18446744073709551615", 0, false},
		{"18446744073709551616", 0, false},
		{"99999999999999999999", 0, false},
		{"-99999999999999999999", 0, false},
		{"00000000000000000001", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"+1", 0, false},
		{"-0", 0, false},
		{"01", 0, false},
		{"00", 0, false},
		{"-01", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1a", 0, false},
		{"0x10", 0, false},
		{"1e3", 0, false},
		{"1.5", 0, false},
		{"--1", 0, false},
		{"1-", 0, false},
		{"١", 0, false}, // Arabic-Indic digit one
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseInt([]byte(tc.in))
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// FuzzParseInt checks ParseInt against strconv, which accepts a superset:
// '+' and leading zeros.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "-1", "+1", "01", "9223372036854775807", "-9223372036854775808", "9223372036854775808"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := ParseInt(b)
		want, err := strconv.ParseInt(string(b), 10, 64)
		canonical := err == nil && strconv.FormatInt(want, 10) == string(b)
		if ok != canonical || ok && got != want {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", b, got, ok, want, canonical)
		}
	})
}

func BenchmarkParseInt(b *testing.B) {
	b.ReportAllocs()
	in := []byte("-123456789")
	for range b.N {
		if _, ok := ParseInt(in); !ok {
			b.Fatal("ParseInt failed")
		}
	}
}
