package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Writers of different identities committing rounds of the same hot key
// at once, with the store's background work running, count exactly.
var concurrent = []subtest{
	{"HotKey", func(t *testing.T, s Store) {
		const writers, rounds = 12, 15
		ctx := testContext(t)
		halt := foldWhile(ctx, t, s)
		batch := func(w int, seq uint64) []change.Change {
			return []change.Change{
				change.Change{Key: "hot", Kind: change.Total, Delta: 1, Var: 0.5},
				change.Change{Key: "hot", Kind: change.Minute, Bucket: t0, Delta: 2},
				inc(fmt.Sprintf("own:%d", w), int64(seq)),
			}
		}
		id := func(w int, seq uint64) store.BatchID { return round(fmt.Sprintf("w%d", w), "g", seq) }
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for seq := uint64(1); seq <= rounds; seq++ {
					if _, err := s.ApplyOnce(ctx, id(w, seq), batch(w, seq)); err != nil {
						t.Errorf("writer %d, round %d: %v", w, seq, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err := halt(); err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"hot": writers * rounds}
		for w := range writers {
			want[fmt.Sprintf("own:%d", w)] = rounds * (rounds + 1) / 2
			applyDup(t, s, id(w, rounds), true, batch(w, rounds)...)
			if m := marks(t, s, id(w, 0).Identity); m != fill(rounds) {
				t.Errorf("writer %d's watermarks: got %v; want %d in every lane", w, m, rounds)
			}
		}
		wantTotals(t, s, want)
		if e := read(t, s, []string{"hot"}).Estimates[0]; e.Var != 0.5*writers*rounds {
			t.Errorf("hot variance: got %v; want %v", e.Var, 0.5*writers*rounds)
		}
		if b := readBuckets(t, s, "hot", change.Minute, t0, t0).Buckets; len(b) != 1 || b[0].Total != 2*writers*rounds {
			t.Errorf("hot minute bucket: got %v; want %d", b, 2*writers*rounds)
		}
	}},
}

// foldWhile runs s.Fold over and over, at least once, until halt is
// called (or the test ends); halt returns the first error of a fold.
func foldWhile(ctx context.Context, t *testing.T, s Store) (halt func() error) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var err error
	wg.Go(func() {
		for folds := 0; ; folds++ {
			select {
			case <-stop:
				if folds > 0 {
					return
				}
			default:
			}
			if err = s.Fold(ctx); err != nil {
				return
			}
		}
	})
	halt = sync.OnceValue(func() error { close(stop); wg.Wait(); return err })
	t.Cleanup(func() { _ = halt() })
	return halt
}
