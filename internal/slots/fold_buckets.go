package slots

import (
	"context"
	"time"
)

// BucketFoldResult says what one pass over the bucket tables did.
type BucketFoldResult struct {
	// Rows is how many bucket slot rows were folded and deleted.
	Rows int64
	// Buckets is how many bucket rows were created or updated.
	Buckets int64
	// Chunks is how many fold transactions committed.
	Chunks int
	// Expired is how many bucket rows past their keep_until were deleted.
	Expired int64
	// Limited says MaxDuration ended the pass before it was done.
	Limited bool
}

// FoldBuckets moves bucket slot rows into their folded tables, chunk rows
// per transaction, as Fold does for totals: each chunk deletes its slot
// rows and adds their sums in one statement, so an increment is moved
// exactly once, and rows a writer holds are skipped (SKIP LOCKED) for the
// next pass. A pass sweeps up to the last slot row that existed when it
// started.
//
// Each windowed kind family folds its own (rollupPart.foldBuckets), in
// the order of the store's writers: count buckets into counter_bucket_rows
// (kind_window_fold.go), then bucket sketch slot rows (windowed unique
// members) into counter_unique_bucket_sketches, counted in Rows. A family
// whose fold ended at MaxDuration (Limited) leaves the next for the next
// pass.
func (s *Store) FoldBuckets(ctx context.Context, opts FoldOptions) (BucketFoldResult, error) {
	var res BucketFoldResult
	for _, w := range s.ws.list {
		if w.rollup.foldBuckets == nil {
			continue
		}
		if err := w.rollup.foldBuckets(s, ctx, opts, &res); err != nil || res.Limited {
			return res, err
		}
	}
	return res, nil
}

// ExpireBuckets deletes bucket rows and folded bucket sketches whose
// keep_until is before now (the database's now() when zero), chunk rows
// of each per transaction, skipping rows a fold holds: each windowed kind
// family's (rollupPart.expireBuckets) in turn, chunk after chunk, until
// each deletes fewer than chunk. It stops after MaxDuration, when
// positive.
func (s *Store) ExpireBuckets(ctx context.Context, now time.Time, opts FoldOptions) (deleted int64, limited bool, err error) {
	chunk, clock := opts.defaults()
	var at *time.Time
	if !now.IsZero() {
		at = &now
	}
	start := clock()
	for first := true; ; first = false {
		if !first && opts.MaxDuration > 0 && clock().Sub(start) >= opts.MaxDuration {
			return deleted, true, nil
		}
		var n int64
		more := false
		for _, w := range s.ws.list {
			if w.rollup.expireBuckets == nil {
				continue
			}
			k, err := w.rollup.expireBuckets(s, ctx, at, chunk)
			if err != nil {
				return deleted, false, err
			}
			n += k
			more = more || k >= int64(chunk)
		}
		deleted += n
		if !more {
			return deleted, false, nil
		}
	}
}

// retryTx is retry without counting attempts.
func (s *Store) retryTx(ctx context.Context, fn func() error) error {
	var attempts int
	return s.retry(ctx, &attempts, fn)
}
