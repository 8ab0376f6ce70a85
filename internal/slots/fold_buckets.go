package slots

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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

// bucketPos is a bucket slot row's primary key, the order a pass sweeps in.
type bucketPos struct {
	key   string
	width int16
	start time.Time
	slot  int16
}

// FoldBuckets moves bucket slot rows into counter_bucket_rows, chunk rows
// per transaction, as Fold does for totals: each chunk deletes its slot
// rows and adds their sums in one statement, so an increment is moved
// exactly once, and rows a writer holds are skipped (SKIP LOCKED) for the
// next pass. A pass sweeps up to the last slot row that existed when it
// started. Counts are numeric, so no chunk can fail for its data.
//
// Bucket sketch slot rows (windowed unique members) are folded after
// them, into counter_unique_bucket_sketches, and counted in Rows.
func (s *Store) FoldBuckets(ctx context.Context, opts FoldOptions) (BucketFoldResult, error) {
	res, err := s.foldCountBuckets(ctx, opts)
	if err != nil || res.Limited {
		return res, err
	}
	n, err := s.foldUniqueBuckets(ctx)
	res.Rows += n
	return res, err
}

// foldCountBuckets is FoldBuckets for count buckets.
func (s *Store) foldCountBuckets(ctx context.Context, opts FoldOptions) (BucketFoldResult, error) {
	var res BucketFoldResult
	chunk, clock := opts.defaults()
	start := clock()
	var end bucketPos
	err := s.pool.QueryRow(ctx, lastBucketSlot).Scan(&end.key, &end.width, &end.start, &end.slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("fold buckets: find the last slot row: %w", err)
	}
	cur := bucketPos{start: time.Unix(0, 0)}
	for first := true; ; first = false {
		if !first && opts.MaxDuration > 0 && clock().Sub(start) >= opts.MaxDuration {
			res.Limited = true
			return res, nil
		}
		var (
			rows, buckets int64
			last          struct {
				key         *string
				width, slot *int16
				start       *time.Time
			}
		)
		err := s.retryTx(ctx, func() error {
			return s.pool.QueryRow(ctx, foldBucketChunk, cur.key, cur.width, cur.start, cur.slot,
				end.key, end.width, end.start, end.slot, chunk).
				Scan(&rows, &buckets, &last.key, &last.width, &last.start, &last.slot)
		})
		if err != nil {
			return res, fmt.Errorf("fold buckets chunk %d (after key %q): %w", res.Chunks+1, cur.key, err)
		}
		res.Chunks++
		res.Rows += rows
		res.Buckets += buckets
		if rows < int64(chunk) || last.key == nil {
			return res, nil // swept past end, or every row left is held
		}
		cur = bucketPos{key: *last.key, width: *last.width, start: *last.start, slot: *last.slot}
	}
}

// ExpireBuckets deletes bucket rows and folded bucket sketches whose
// keep_until is before now (the database's now() when zero), chunk rows
// of each per transaction, skipping rows a fold holds. It stops after MaxDuration, when positive.
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
		err := s.retryTx(ctx, func() error {
			return s.pool.QueryRow(ctx, expireBuckets, at, chunk).Scan(&n)
		})
		if err != nil {
			return deleted, false, fmt.Errorf("expire buckets: %w", err)
		}
		u, err := s.expireUniqueBuckets(ctx, at, chunk)
		if err != nil {
			return deleted, false, err
		}
		deleted += n + u
		if n < int64(chunk) && u < int64(chunk) {
			return deleted, false, nil
		}
	}
}

// retryTx is retry without counting attempts.
func (s *Store) retryTx(ctx context.Context, fn func() error) error {
	var attempts int
	return s.retry(ctx, &attempts, fn)
}

const lastBucketSlot = `
SELECT key, width, bucket_start, slot FROM counter_bucket_slots
ORDER BY key DESC, width DESC, bucket_start DESC, slot DESC LIMIT 1`

// foldBucketChunk moves up to $9 unheld bucket slot rows after ($1..$4)
// through ($5..$8) into counter_bucket_rows and returns the last it
// picked. keep_until keeps the latest of the rows'.
const foldBucketChunk = `
WITH picked AS MATERIALIZED (
    SELECT key, width, bucket_start, slot FROM counter_bucket_slots
    WHERE (key, width, bucket_start, slot) > ($1::text, $2::smallint, $3::timestamptz, $4::smallint)
      AND (key, width, bucket_start, slot) <= ($5::text, $6::smallint, $7::timestamptz, $8::smallint)
    ORDER BY key, width, bucket_start, slot
    LIMIT $9
    FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM counter_bucket_slots cs
    USING picked p
    WHERE cs.key = p.key AND cs.width = p.width AND cs.bucket_start = p.bucket_start AND cs.slot = p.slot
    RETURNING cs.key, cs.width, cs.bucket_start, cs.count, cs.variance, cs.keep_until
), sums AS (
    SELECT key, width, bucket_start, sum(count) AS n, sum(variance) AS v, max(keep_until) AS keep_until
    FROM moved GROUP BY key, width, bucket_start
), folded AS (
    INSERT INTO counter_bucket_rows AS r (key, width, bucket_start, total, variance, keep_until)
    SELECT key, width, bucket_start, n, v, keep_until FROM sums ORDER BY key, width, bucket_start
    ON CONFLICT (key, width, bucket_start) DO UPDATE
    SET total = r.total + excluded.total, variance = r.variance + excluded.variance,
        keep_until = greatest(r.keep_until, excluded.keep_until)
    RETURNING 1
), last AS (
    SELECT key, width, bucket_start, slot FROM picked
    ORDER BY key DESC, width DESC, bucket_start DESC, slot DESC LIMIT 1
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM folded),
       (SELECT key FROM last), (SELECT width FROM last), (SELECT bucket_start FROM last), (SELECT slot FROM last)`

// expireBuckets deletes up to $2 bucket rows whose keep_until is before
// $1 (now() when null), oldest first, through counter_bucket_rows_by_expiry.
const expireBuckets = `
WITH gone AS (
    DELETE FROM counter_bucket_rows r
    USING (
        SELECT key, width, bucket_start FROM counter_bucket_rows
        WHERE keep_until < coalesce($1::timestamptz, now())
        ORDER BY keep_until
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    ) AS p
    WHERE r.key = p.key AND r.width = p.width AND r.bucket_start = p.bucket_start
    RETURNING 1
)
SELECT count(*) FROM gone`
