package pattern

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/bench/latency"
)

// CeilingTable holds one row per key for the ceiling measurement.
const CeilingTable = "pattern_ceiling"

// ceilingSQL is the multi-row upsert: one statement adds a batch of
// distinct keys' deltas.
const ceilingSQL = `INSERT INTO pattern_ceiling AS t (key, n)
SELECT * FROM unnest($1::text[], $2::bigint[])
ON CONFLICT (key) DO UPDATE SET n = t.n + excluded.n`

// CeilingLoad describes one ceiling run.
type CeilingLoad struct {
	// Conns is the number of connections writing at once, each on its own
	// share of the keys (index mod Conns), so they never wait on each
	// other's rows.
	Conns int
	// Duration is how long connections start new statements.
	Duration time.Duration
	// Batch is the number of distinct keys one statement writes (capped
	// at a quarter of a connection's keys so batches can fill).
	Batch int
	Dist  keyspace.Dist
	Keys  uint64
	Seed  uint64
}

// CeilingResult is what a ceiling run measured.
type CeilingResult struct {
	// Rows counts rows upserted, Increments the deltas they carried, and
	// Statements the statements committed.
	Rows, Increments, Statements int64
	// Stored is how much the table's total grew; it equals Increments.
	Stored  int64
	Elapsed time.Duration
	// P50 and P99 are the latency of one statement.
	P50, P99 time.Duration
	// Batch is the number of distinct keys per statement actually used.
	Batch int
}

// SetupCeiling creates the ceiling table with a zero row for every key
// below keys, so the run measures updates through the upsert path.
func SetupCeiling(ctx context.Context, pool *pgxpool.Pool, keys uint64) error {
	return createPerKey(ctx, pool, CeilingTable, keys)
}

// batch is one statement's arguments.
type batch struct {
	keys   []string
	deltas []int64
	sum    int64
}

// makeBatches draws count batches of up to size distinct keys from the
// keys ≡ part (mod parts), adding repeated draws into one delta as a
// coalescing writer would.
func makeBatches(rng *rand.Rand, load CeilingLoad, part, parts, size, count int) []batch {
	share := max(load.Keys/uint64(parts), 1)
	next := load.Dist.Source(rng, share)
	out := make([]batch, count)
	for b := range out {
		deltas := make(map[uint64]int64, size)
		for draws := 0; len(deltas) < size && draws < 50*size; draws++ {
			deltas[next()*uint64(parts)+uint64(part)]++
		}
		idx := make([]string, 0, len(deltas))
		byName := make(map[string]int64, len(deltas))
		for i, d := range deltas {
			name := keyspace.Name(i)
			idx = append(idx, name)
			byName[name] = d
		}
		// Sorted keys lock rows in one order, as any batching writer should.
		slices.Sort(idx)
		bt := batch{keys: idx, deltas: make([]int64, len(idx))}
		for j, k := range idx {
			bt.deltas[j] = byName[k]
			bt.sum += byName[k]
		}
		out[b] = bt
	}
	return out
}

// Ceiling upserts batches of distinct keys from load.Conns connections for
// load.Duration and measures the rows per second PostgreSQL sustains.
// Batches are drawn before the clock starts.
func Ceiling(ctx context.Context, pool *pgxpool.Pool, load CeilingLoad) (CeilingResult, error) {
	if load.Conns < 1 || load.Duration <= 0 || load.Keys < 1 || load.Batch < 1 {
		return CeilingResult{}, errors.New("pattern: CeilingLoad needs Conns, Duration, Keys and Batch")
	}
	size := max(min(load.Batch, int(load.Keys/uint64(load.Conns)/4)), 1)
	before, err := total(ctx, pool, CeilingTable)
	if err != nil {
		return CeilingResult{}, err
	}
	const batchesPerConn = 4
	work := make([][]batch, load.Conns)
	for c := range work {
		work[c] = makeBatches(rand.New(rand.NewPCG(load.Seed, uint64(c))), load, c, load.Conns, size, batchesPerConn)
	}
	conns, release, err := acquire(ctx, pool, load.Conns)
	if err != nil {
		return CeilingResult{}, err
	}
	defer release()

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		res      = CeilingResult{Batch: size}
		hist     latency.Histogram
		firstErr error
	)
	start := time.Now()
	deadline := start.Add(load.Duration)
	for ci, c := range conns {
		wg.Go(func() {
			lat := new(latency.Histogram)
			var rows, incrs, stmts int64
			var err error
			for i := 0; i < 1_000_000 && time.Now().Before(deadline); i++ {
				b := work[ci][i%batchesPerConn]
				t0 := time.Now()
				if _, err = c.Exec(ctx, ceilingSQL, b.keys, b.deltas); err != nil {
					err = fmt.Errorf("ceiling upsert: %w", err)
					break
				}
				lat.Record(time.Since(t0))
				rows += int64(len(b.keys))
				incrs += b.sum
				stmts++
			}
			mu.Lock()
			defer mu.Unlock()
			res.Rows += rows
			res.Increments += incrs
			res.Statements += stmts
			hist.Merge(lat)
			if firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.P50, res.P99 = hist.Quantile(0.50), hist.Quantile(0.99)
	if firstErr != nil {
		return res, firstErr
	}
	after, err := total(ctx, pool, CeilingTable)
	if err != nil {
		return res, err
	}
	res.Stored = after - before
	return res, nil
}
