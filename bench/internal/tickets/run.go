package tickets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/bench/latency"
)

// Load describes one run.
type Load struct {
	// Owner's tickets are drawn; Tickets is how many it has.
	Owner   int64
	Tickets int
	// Clients draw concurrently, each in a closed loop.
	Clients int
	// Duration bounds the run when the tickets last longer.
	Duration time.Duration
}

// Result is what a run measured.
type Result struct {
	// Draws counts tickets drawn; Retries the extra attempts they took;
	// Failures the draws that got nothing while the owner had undrawn
	// tickets; Errors the draws that failed with an error.
	Draws, Retries, Failures, Errors int64
	// Duplicates counts tickets handed out more than once.
	Duplicates int64
	// Left is the owner's undrawn tickets afterwards, Marked those the
	// table marks drawn.
	Left, Marked int64
	Elapsed      time.Duration
	// P50 and P99 are the latency of one successful draw, retries
	// included.
	P50, P99 time.Duration
	// Err is the first failed draw's error, if any.
	Err error
}

// Rate is tickets drawn per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Draws) / r.Elapsed.Seconds()
}

// Consistent says no ticket was handed out twice and the table marks
// exactly the tickets handed out.
func (r Result) Consistent() bool { return r.Duplicates == 0 && r.Marked == r.Draws }

// maxErrors bounds one client's errors, so a server that is gone ends the
// run instead of spinning on it.
const maxErrors = 1000

// RunSQL fills owner's tickets and draws them with a from load.Clients
// pooled connections (the pool needs one more, to count what is left).
func RunSQL(ctx context.Context, pool *pgxpool.Pool, a Approach, load Load) (Result, error) {
	if err := Fill(ctx, pool, load.Owner, load.Tickets); err != nil {
		return Result{}, err
	}
	draws := make([]Draw, load.Clients)
	for i := range draws {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("connect client %d: %w", i, err)
		}
		defer c.Release()
		draws[i] = a.Drawer(c.Conn(), load.Owner)
	}
	return Measure(ctx, pool, load, draws)
}

// Measure draws with every Draw concurrently until load.Tickets have been
// drawn or load.Duration has passed, then checks the table. The owner's
// tickets must be filled already. No more draws are under way at once
// than tickets are left, so a draw that gets nothing is a failure; it
// gives its turn back and its client draws again.
func Measure(ctx context.Context, pool *pgxpool.Pool, load Load, draws []Draw) (Result, error) {
	if len(draws) < 1 || load.Duration <= 0 || load.Tickets < 0 {
		return Result{}, errors.New("tickets: Measure needs draws, a Duration and tickets ≥ 0")
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		res     Result
		hist    latency.Histogram
		drawn   []int64
		claimed atomic.Int64
	)
	start := time.Now()
	deadline := start.Add(load.Duration)
	for i, draw := range draws {
		wg.Go(func() {
			lat := new(latency.Histogram)
			var mine []int64
			var r Result
			for r.Errors < maxErrors && ctx.Err() == nil && time.Now().Before(deadline) {
				if claimed.Add(1) > int64(load.Tickets) {
					// Every ticket is drawn or being drawn; a draw
					// that fails gives its turn back to its client.
					claimed.Add(-1)
					break
				}
				t0 := time.Now()
				id, retries, err := draw(ctx)
				r.Retries += retries
				if err != nil || id == 0 {
					claimed.Add(-1)
				}
				if err != nil {
					r.Errors++
					if r.Err == nil {
						r.Err = fmt.Errorf("client %d: %w", i, err)
					}
					continue
				}
				if id != 0 {
					lat.Record(time.Since(t0))
					mine = append(mine, id)
					continue
				}
				left, err := Left(ctx, pool, load.Owner)
				if err != nil {
					r.Errors++
					r.Err = cmpErr(r.Err, err)
					continue
				}
				if left == 0 {
					break // only a double draw empties the table early
				}
				r.Failures++
			}
			mu.Lock()
			defer mu.Unlock()
			res.Draws += int64(len(mine))
			res.Retries += r.Retries
			res.Failures += r.Failures
			res.Errors += r.Errors
			if res.Err == nil {
				res.Err = r.Err
			}
			drawn = append(drawn, mine...)
			hist.Merge(lat)
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.P50, res.P99 = hist.Quantile(0.50), hist.Quantile(0.99)
	res.Duplicates = duplicates(drawn)
	left, err := Left(ctx, pool, load.Owner)
	if err != nil {
		return res, err
	}
	res.Left, res.Marked = left, int64(load.Tickets)-left
	return res, nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// duplicates counts the ids that appear more than once, each repeat once.
func duplicates(ids []int64) int64 {
	slices.Sort(ids)
	var n int64
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			n++
		}
	}
	return n
}
