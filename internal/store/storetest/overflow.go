package storetest

import (
	"errors"
	"math"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// A count beyond int64 never makes a round fail, so it never holds back
// other keys: it is stored exactly, a read hands it over exactly (Wide)
// for that key only, a bucket read of it is an error wrapping
// store.ErrOverflow for that key only, Overflows counts it, and it comes
// back into range exactly.
var overflow = []subtest{
	{"Totals", func(t *testing.T, s Store) {
		id := func(seq uint64) store.BatchID { return round("o", "g", seq) }
		apply(t, s, id(1), inc("big", math.MaxInt64-1))
		apply(t, s, id(2), inc("big", 1), inc("other", 5))
		apply(t, s, id(3), inc("big", math.MaxInt64), inc("other", 5))
		check := func(when string) {
			t.Helper()
			snap := read(t, s, []string{"other", "big"})
			if e := snap.Estimates[0]; e.Total != 10 || e.Wide != nil {
				t.Errorf("%s: other: got %+v; want 10", when, e)
			}
			if w := snap.Estimates[1].Wide; w == nil || w.String() != "18446744073709551614" {
				t.Errorf("%s: big: got %+v; want Wide 18446744073709551614", when, snap.Estimates[1])
			}
		}
		check("before a fold")
		fold(t, s)
		check("after a fold")
		if n, err := s.Overflows(testContext(t)); err != nil || n != 1 {
			t.Errorf("Overflows: got %d, %v; want 1", n, err)
		}
		apply(t, s, id(4), inc("big", -math.MaxInt64))
		if got := totals(t, s, "big")[0]; got != math.MaxInt64 {
			t.Fatalf("big back in range: got %d; want %d", got, int64(math.MaxInt64))
		}
		fold(t, s)
		if n, err := s.Overflows(testContext(t)); err != nil || n != 0 {
			t.Errorf("Overflows back in range: got %d, %v; want 0", n, err)
		}
	}},
	{"Buckets", func(t *testing.T, s Store) {
		hour := func(key string, n int64) change.Change {
			return change.Change{Key: key, Kind: change.Hour, Bucket: t0, Delta: n}
		}
		apply(t, s, round("o", "g", 1), hour("big", math.MaxInt64), hour("other", 3))
		apply(t, s, round("o", "g", 2), hour("big", math.MaxInt64), hour("other", 4))
		ctx := testContext(t)
		if _, err := s.ReadBuckets(ctx, "big", change.Hour, t0, t0, nil); !errors.Is(err, store.ErrOverflow) {
			t.Errorf("ReadBuckets of a bucket beyond int64: got %v; want store.ErrOverflow", err)
		}
		if b := readBuckets(t, s, "other", change.Hour, t0, t0).Buckets; len(b) != 1 || b[0].Total != 7 {
			t.Errorf("other: got %v; want 7", b)
		}
		if _, err := s.ReadTop(ctx, "", change.Hour, t0, 10, []string{"big"}, nil); !errors.Is(err, store.ErrOverflow) {
			t.Errorf("ReadTop of a count beyond int64: got %v; want store.ErrOverflow", err)
		}
		apply(t, s, round("o", "g", 3), hour("big", -math.MaxInt64))
		fold(t, s)
		if b := readBuckets(t, s, "big", change.Hour, t0, t0).Buckets; len(b) != 1 || b[0].Total != math.MaxInt64 {
			t.Errorf("big back in range: got %v; want %d", b, int64(math.MaxInt64))
		}
	}},
}
