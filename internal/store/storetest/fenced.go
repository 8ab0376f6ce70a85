package storetest

import (
	"errors"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Once another daemon has taken an instance over, a round of the old
// generation fails with an error wrapping store.ErrFenced and writes
// nothing, of any kind; the new owner's rounds are written.
var fenced = []subtest{
	{"Takeover", func(t *testing.T, s Store) {
		old := round("i", "g1", 1)
		apply(t, s, old, inc("k", 1))
		if err := s.Claim(testContext(t), store.Identity{Instance: "i", Generation: "g2"}); err != nil {
			t.Fatal(err)
		}
		for i, batch := range [][]change.Change{
			{inc("k", 1)},
			{{Key: "set", Kind: change.Set, Delta: 5}},
			{{Key: "k", Kind: change.Hour, Bucket: t0, Delta: 1}},
		} {
			old.Seq++
			if _, err := s.ApplyOnce(testContext(t), old, batch); !errors.Is(err, store.ErrFenced) {
				t.Errorf("old owner's round %d after the takeover: got %v; want store.ErrFenced", i, err)
			}
		}
		apply(t, s, round("i", "g2", 1), inc("k", 1))
		wantTotals(t, s, map[string]int64{"k": 2, "set": 0})
		if b := readBuckets(t, s, "k", change.Hour, t0, t0).Buckets; len(b) != 0 {
			t.Errorf("buckets of fenced rounds: %v; want none", b)
		}
		if m := marks(t, s, old.Identity); m != fill(1) {
			t.Errorf("old generation's watermarks: got %v; want 1 in every lane", m)
		}
	}},
}
