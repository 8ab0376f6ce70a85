package budget

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/counterd/counterd/internal/bench/latency"
)

// Taker asks for one unit: granted, refused (the budget is spent, as far
// as this client can tell) or an error. Each client has its own Taker and
// calls it from one goroutine.
type Taker func(ctx context.Context) (granted bool, err error)

// maxErrors bounds the errors one client tolerates before it stops, so a
// server that is gone ends a cell instead of spinning on it.
const maxErrors = 1000

// Tally is what Drive counted.
type Tally struct {
	// Grants counts units granted, Errors takes that failed.
	Grants, Errors int64
	// Exhausted says every client was refused before the time was up.
	Exhausted bool
	Elapsed   time.Duration
	// P50 and P99 are the latency of one grant.
	P50, P99 time.Duration
	// Err is the first failed take's error, if any.
	Err error
}

// Rate is grants per second.
func (t Tally) Rate() float64 {
	if t.Elapsed <= 0 {
		return 0
	}
	return float64(t.Grants) / t.Elapsed.Seconds()
}

// Drive runs every taker in a closed loop, each on its own goroutine,
// until it is refused or d has passed, whichever comes first, and counts
// what happened. A client that is refused stops; one that errs goes on
// (a server may refuse for a while), up to maxErrors.
func Drive(ctx context.Context, takers []Taker, d time.Duration) Tally {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		t       Tally
		hist    latency.Histogram
		refused int
	)
	start := time.Now()
	deadline := start.Add(d)
	for i, take := range takers {
		wg.Go(func() {
			lat := new(latency.Histogram)
			var grants, errs int64
			var first error
			out := false
			for errs < maxErrors && ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				ok, err := take(ctx)
				if err != nil {
					errs++
					if first == nil {
						first = fmt.Errorf("client %d: %w", i, err)
					}
					continue
				}
				if !ok {
					out = true
					break
				}
				lat.Record(time.Since(t0))
				grants++
			}
			mu.Lock()
			defer mu.Unlock()
			t.Grants += grants
			t.Errors += errs
			if out {
				refused++
			}
			if t.Err == nil {
				t.Err = first
			}
			hist.Merge(lat)
		})
	}
	wg.Wait()
	t.Elapsed = time.Since(start)
	t.Exhausted = len(takers) > 0 && refused == len(takers)
	t.P50, t.P99 = hist.Quantile(0.50), hist.Quantile(0.99)
	return t
}

// Overspend is how many units were granted beyond the budget.
func Overspend(budget, granted int64) int64 { return max(0, granted-budget) }

// Underspend is how many units of the budget were neither granted nor
// left to grant (forfeited leases, for counterd): budget − granted −
// remaining, never negative. remaining is what the store still offers
// once every lease is back; a negative remainder (an overspent naive
// row) counts as none.
func Underspend(budget, granted, remaining int64) int64 {
	return max(0, budget-granted-max(remaining, 0))
}
