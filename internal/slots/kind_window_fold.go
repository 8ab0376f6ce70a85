package slots

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The rollup's part of time windows (change.Minute, Hour, Day), on their
// writer (kind_window.go): FoldBuckets folds count bucket slot rows into
// counter_bucket_rows, ExpireBuckets deletes bucket rows past their
// keep_until.

// bucketPos is a bucket slot row's primary key, the order a pass sweeps in.
type bucketPos struct {
	key   string
	width int16
	start time.Time
	slot  int16
}

// foldCountBuckets is FoldBuckets for count buckets: it moves bucket
// slot rows into counter_bucket_rows, chunk rows per transaction, up to
// the last slot row that existed when it started, adding to res. Counts
// are numeric, so no chunk can fail for its data.
func (s *Store) foldCountBuckets(ctx context.Context, opts FoldOptions, res *BucketFoldResult) error {
	chunk, clock := opts.defaults()
	start := clock()
	var end bucketPos
	err := s.pool.QueryRow(ctx, lastBucketSlot).Scan(&end.key, &end.width, &end.start, &end.slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fold buckets: find the last slot row: %w", err)
	}
	cur := bucketPos{start: time.Unix(0, 0)}
	for first := true; ; first = false {
		if !first && opts.MaxDuration > 0 && clock().Sub(start) >= opts.MaxDuration {
			res.Limited = true
			return nil
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
			return fmt.Errorf("fold buckets chunk %d (after key %q): %w", res.Chunks+1, cur.key, err)
		}
		res.Chunks++
		res.Rows += rows
		res.Buckets += buckets
		if rows < int64(chunk) || last.key == nil {
			return nil // swept past end, or every row left is held
		}
		cur = bucketPos{key: *last.key, width: *last.width, start: *last.start, slot: *last.slot}
	}
}

// expireCountBuckets deletes up to chunk bucket rows whose keep_until is
// before at (now() when nil), in one transaction.
func (s *Store) expireCountBuckets(ctx context.Context, at *time.Time, chunk int) (int64, error) {
	var n int64
	err := s.retryTx(ctx, func() error {
		return s.pool.QueryRow(ctx, expireBuckets, at, chunk).Scan(&n)
	})
	if err != nil {
		return n, fmt.Errorf("expire buckets: %w", err)
	}
	return n, nil
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
