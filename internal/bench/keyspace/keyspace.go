// Package keyspace draws the keys a benchmark increments from one of three
// distributions over N keys: hot (every increment on one key), Zipf (a few
// keys take most increments, as page views do) and uniform.
//
// Keys are named Prefix followed by their index in decimal ("post:0",
// "post:1", ...), and index 0 is the hot key and Zipf's most frequent one,
// so every approach under test sees the same names.
package keyspace

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Prefix starts every key name.
const Prefix = "post:"

// ZipfS is the Zipf exponent s: key i is drawn with probability
// proportional to 1/(1+i)^s. At s = 1.1 over a million keys the hottest key
// takes about 12% of the increments and the top 1% of keys about 80%.
const ZipfS = 1.1

// Dist is a key distribution.
type Dist int

// The distributions.
const (
	Hot Dist = iota
	Zipf
	Uniform
)

var names = [...]string{Hot: "hot", Zipf: "zipf", Uniform: "uniform"}

// String returns the distribution's name as Parse reads it.
func (d Dist) String() string {
	if d < 0 || int(d) >= len(names) {
		return "Dist(" + strconv.Itoa(int(d)) + ")"
	}
	return names[d]
}

// Describe says in a few words how keys are drawn over n keys.
func (d Dist) Describe(n uint64) string {
	switch d {
	case Hot:
		return "every increment on one key"
	case Zipf:
		return fmt.Sprintf("Zipf (s=%.1f) over %d keys", ZipfS, n)
	default:
		return fmt.Sprintf("uniform over %d keys", n)
	}
}

// Parse reads a distribution name.
func Parse(s string) (Dist, error) {
	for d, name := range names {
		if strings.EqualFold(s, name) {
			return Dist(d), nil
		}
	}
	return 0, fmt.Errorf("unknown key distribution %q (want hot, zipf or uniform)", s)
}

// Source returns a function drawing key indexes below n with rng. It is
// not safe for concurrent use: give every client its own rng and Source.
func (d Dist) Source(rng *rand.Rand, n uint64) func() uint64 {
	switch {
	case d == Hot || n <= 1:
		return func() uint64 { return 0 }
	case d == Zipf:
		z := rand.NewZipf(rng, ZipfS, 1, n-1)
		return z.Uint64
	default:
		return func() uint64 { return rng.Uint64N(n) }
	}
}

// Name returns the key with index i.
func Name(i uint64) string { return Prefix + strconv.FormatUint(i, 10) }

// AppendName appends the key with index i to b.
func AppendName(b []byte, i uint64) []byte {
	return strconv.AppendUint(append(b, Prefix...), i, 10)
}
