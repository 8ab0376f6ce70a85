package keyspace_test

import (
	"math/rand/v2"
	"testing"

	"github.com/counterd/counterd/internal/bench/keyspace"
)

func TestSources(t *testing.T) {
	t.Parallel()
	const n, draws = 1000, 100000
	for _, tc := range []struct {
		dist keyspace.Dist
		// share of draws that hit key 0, within [lo, hi]
		lo, hi float64
		// distinct keys seen, at least
		distinct int
	}{
		{keyspace.Hot, 1, 1, 1},
		{keyspace.Zipf, 0.12, 0.25, 500},
		{keyspace.Uniform, 0, 0.003, 999},
	} {
		t.Run(tc.dist.String(), func(t *testing.T) {
			t.Parallel()
			next := tc.dist.Source(rand.New(rand.NewPCG(7, 7)), n)
			seen := map[uint64]int{}
			for range draws {
				i := next()
				if i >= n {
					t.Fatalf("index %d; want below %d", i, n)
				}
				seen[i]++
			}
			share := float64(seen[0]) / draws
			if share < tc.lo || share > tc.hi {
				t.Errorf("key 0 share %.4f; want within [%.3f, %.3f]", share, tc.lo, tc.hi)
			}
			if len(seen) < tc.distinct {
				t.Errorf("%d distinct keys; want at least %d", len(seen), tc.distinct)
			}
		})
	}
}

func TestParseAndNames(t *testing.T) {
	t.Parallel()
	f := func(s string, want keyspace.Dist, ok bool) {
		t.Helper()
		got, err := keyspace.Parse(s)
		if (err == nil) != ok || (ok && got != want) {
			t.Fatalf("Parse(%q) = %v, %v; want %v, ok=%v", s, got, err, want, ok)
		}
	}
	f("hot", keyspace.Hot, true)
	f("Zipf", keyspace.Zipf, true)
	f("uniform", keyspace.Uniform, true)
	f("normal", 0, false)
	if got := string(keyspace.AppendName(nil, 42)); got != keyspace.Name(42) || got != "post:42" {
		t.Fatalf("names: got %q and %q; want post:42", got, keyspace.Name(42))
	}
}
