package hll

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// Members rebuild a sketch byte for byte, alone and added to another
// (exact or not), for exact sketches and ones with registers.
func TestMembers(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(22, 1))
	sketch := func(n int) *Sketch {
		s := NewDefault()
		for range n {
			s.Add(rng.Uint64())
		}
		return s
	}
	for _, n := range []int{0, 1, 500, 1280, 1281, 3000, 50_000} {
		for _, other := range []int{0, 10, 2000} {
			src, dst := sketch(n), sketch(other)
			want := dst.Clone()
			if err := want.Union(src); err != nil {
				t.Fatal(err)
			}
			for _, h := range src.Members() {
				dst.Add(h)
			}
			wb, _ := want.MarshalBinary()
			gb, _ := dst.MarshalBinary()
			if !bytes.Equal(wb, gb) {
				t.Errorf("%d members added to a sketch of %d: got %s sketch estimating %d; want %s estimating %d",
					n, other, dst.Kind(), dst.Estimate(), want.Kind(), want.Estimate())
			}
		}
	}
}
