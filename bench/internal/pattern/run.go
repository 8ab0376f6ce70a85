package pattern

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/bench/latency"
)

// Load describes one run of a pattern.
type Load struct {
	// Clients is the number of connections incrementing concurrently,
	// each in a closed loop; the pool must allow Clients connections.
	Clients int
	// Duration is how long clients start new increments; each finishes
	// the one it has in flight.
	Duration time.Duration
	// MaxOps bounds each client's increments (default 100 million).
	MaxOps int64
	// Dist draws keys below Keys.
	Dist keyspace.Dist
	Keys uint64
	// Seed varies the random streams between runs.
	Seed uint64
}

// Result is what a run measured.
type Result struct {
	// Ops counts increments acknowledged, Errors those that failed.
	Ops, Errors int64
	// Rows counts rows the statements wrote.
	Rows int64
	// Stored is how much the table's total grew.
	Stored  int64
	Elapsed time.Duration
	// P50 and P99 are the latency of one increment.
	P50, P99 time.Duration
	// Err is the first failed increment's error, if any.
	Err error
}

// Rate is increments acknowledged per second.
func (r Result) Rate() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// Run increments with p from load.Clients connections for load.Duration
// and measures how it went. It returns an error only when it cannot
// measure; failed increments are counted in the Result.
func Run(ctx context.Context, pool *pgxpool.Pool, p Pattern, load Load) (Result, error) {
	if load.Clients < 1 || load.Duration <= 0 || load.Keys < 1 {
		return Result{}, errors.New("pattern: Load needs Clients, Duration and Keys")
	}
	if load.MaxOps <= 0 {
		load.MaxOps = 100_000_000
	}
	before, err := total(ctx, pool, p.Table())
	if err != nil {
		return Result{}, err
	}
	conns, release, err := acquire(ctx, pool, load.Clients)
	if err != nil {
		return Result{}, err
	}
	defer release()

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		res  Result
		hist latency.Histogram
	)
	start := time.Now()
	deadline := start.Add(load.Duration)
	for i, c := range conns {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(load.Seed, uint64(i)))
			next := load.Dist.Source(rng, load.Keys)
			lat := new(latency.Histogram)
			var ops, errs, rows int64
			var first error
			for ops+errs < load.MaxOps && time.Now().Before(deadline) {
				key := keyspace.Name(next())
				t0 := time.Now()
				n, err := p.incr(ctx, c.Conn(), rng, key)
				lat.Record(time.Since(t0))
				if err != nil {
					errs++
					if first == nil {
						first = fmt.Errorf("%s %s: %w", p.Name, key, err)
					}
					if ctx.Err() != nil || c.Conn().IsClosed() {
						break
					}
					continue
				}
				ops++
				rows += n
			}
			mu.Lock()
			defer mu.Unlock()
			res.Ops += ops
			res.Errors += errs
			res.Rows += rows
			if res.Err == nil {
				res.Err = first
			}
			hist.Merge(lat)
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.P50, res.P99 = hist.Quantile(0.50), hist.Quantile(0.99)
	after, err := total(ctx, pool, p.Table())
	if err != nil {
		return res, err
	}
	res.Stored = after - before
	return res, nil
}
