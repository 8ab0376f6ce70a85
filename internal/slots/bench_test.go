package slots_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"

	"golang.org/x/sync/errgroup"

	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

// BenchmarkApplyOnce writes rounds of distinct keys drawn from a million,
// as a daemon's flusher does under a Zipf-like load, and reports keys
// (slot rows) written per second. The "existing" half of each round hits
// keys that already have slot rows (the SKIP LOCKED path); the rest are
// new rows (the upsert path). Compare with the harness's multi-row upsert
// ceiling (bench/cmd/counterbench).
func BenchmarkApplyOnce(b *testing.B) {
	for _, c := range []struct{ size, space, writers int }{
		{10000, 1_000_000, 1}, {10000, 1_000_000, 2}, {10000, 20000, 1}, {10000, 20000, 2},
	} {
		size := c.size
		b.Run(fmt.Sprintf("keys=%d/of=%d/writers=%d", c.size, c.space, c.writers), func(b *testing.B) {
			db := pgtest.New(b, pgtest.Options{})
			s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Writers: c.writers, SplitAlways: true})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, 2))
			batch := make([]change.Change, size)
			var keys int
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				names, ns := distinctKeys(rng, size, c.space)
				for j := range batch {
					batch[j] = change.Change{Kind: change.Total, Key: names[j], Delta: ns[j]}
				}
				b.StartTimer()
				if _, err := s.ApplyOnce(ctx, store.BatchID{Identity: store.Identity{Instance: "bench"}, Seq: uint64(i + 1)}, batch); err != nil {
					b.Fatal(err)
				}
				keys += len(batch)
			}
			b.ReportMetric(float64(keys)/b.Elapsed().Seconds(), "keys/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkUpsertCeiling is the fastest plain multi-row upsert of the same
// rounds into a one-row-per-key table, with no slots, no identity and no
// locking choice, from one connection or from two writing halves of each
// round at once: the ceiling BenchmarkApplyOnce is measured against.
func BenchmarkUpsertCeiling(b *testing.B) {
	for _, c := range []struct{ size, space, conns int }{
		{10000, 1_000_000, 1}, {10000, 1_000_000, 2}, {10000, 20000, 1}, {10000, 20000, 2},
	} {
		b.Run(fmt.Sprintf("keys=%d/of=%d/conns=%d", c.size, c.space, c.conns), func(b *testing.B) {
			db := pgtest.New(b, pgtest.Options{})
			ctx := context.Background()
			if _, err := db.Pool.Exec(ctx, `CREATE TABLE ceiling (key text PRIMARY KEY, n bigint NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var keys int
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				names, ns := distinctKeys(rng, c.size, c.space)
				b.StartTimer()
				var g errgroup.Group
				for part := range c.conns {
					lo, hi := part*len(names)/c.conns, (part+1)*len(names)/c.conns
					g.Go(func() error {
						_, err := db.Pool.Exec(ctx, `INSERT INTO ceiling AS c (key, n)
SELECT * FROM unnest($1::text[], $2::bigint[])
ON CONFLICT (key) DO UPDATE SET n = c.n + excluded.n`, names[lo:hi], ns[lo:hi])
						return err
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				keys += len(names)
			}
			b.ReportMetric(float64(keys)/b.Elapsed().Seconds(), "keys/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// distinctKeys returns size sorted distinct keys below space, each with
// delta 1.
func distinctKeys(rng *rand.Rand, size, space int) ([]string, []int64) {
	picked := make(map[int]bool, size)
	for len(picked) < size {
		picked[rng.IntN(space)] = true
	}
	names := make([]string, 0, size)
	for k := range picked {
		names = append(names, "post:"+strconv.Itoa(k))
	}
	slices.Sort(names)
	ns := make([]int64, size)
	for i := range ns {
		ns[i] = 1
	}
	return names, ns
}
