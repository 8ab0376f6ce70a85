package slots

import (
	"context"
	"fmt"
	"time"

	"github.com/counterd/counterd/internal/change"
)

// Windowed unique members (change.UniqueMinute, Hour, Day) are written as
// postgresql-hll sketches per key, width and bucket
// (sql/016_unique_buckets.up.sql): a round's members of one bucket become
// one sketch unioned (hll_union) into one of the bucket's slot rows, in
// the round's transaction after its lanes moved, so a lane's members are
// written exactly once, as plain members are (kind_unique.go). The rollup
// folds the slot rows (FoldBuckets) and deletes buckets past their
// keep_until (ExpireBuckets), as it does count buckets.
//
// UniqueBucketsWriter is the Writer of windowed unique members, with their
// rollup fold and expiry, one of a store's Options.Kinds.
func UniqueBucketsWriter() Writer {
	return Writer{Name: "unique buckets", Kinds: []change.Kind{change.UniqueMinute, change.UniqueHour, change.UniqueDay},
		Order: 3, Exec: writeUniqueBuckets,
		rollup: rollupPart{foldBuckets: (*Store).foldUniqueBuckets, expireBuckets: (*Store).expireUniqueBuckets}}
}

// writeUniqueBuckets writes a round's windowed members: each bucket's go
// to one random slot row.
func writeUniqueBuckets(ctx context.Context, r *Round, cs []change.Change) error {
	n := len(cs)
	keys, widths := make([]string, n), make([]int16, n)
	starts, keeps := make([]time.Time, n), make([]time.Time, n)
	hashes := make([]int64, n)
	for i, c := range cs {
		u, err := change.UniqueBucketOf(c)
		if err != nil {
			return err
		}
		start := time.Unix(u.Start, 0).UTC()
		keys[i], widths[i], starts[i], hashes[i], keeps[i] =
			u.Key, int16(u.Window), start, c.Bucket, r.store.keepUntil(u.Key, u.Window, start)
	}
	var written int
	err := r.Tx.QueryRow(ctx, `SELECT counter_unique_buckets_write($1, $2, $3, $4, $5, $6)`,
		keys, widths, starts, hashes, keeps, r.Slots).Scan(&written)
	if err != nil {
		return fmt.Errorf("write %d bucket members: %w", n, err)
	}
	r.Result.Updated += written
	return nil
}

// ReadBucketMembers returns, for each key, the union of its stored bucket
// sketches of window kind w (change.Minute, Hour, Day) that start from
// from through to (unix seconds), folded and not, in postgresql-hll's
// storage format; nil for a key without one.
func (s *Store) ReadBucketMembers(ctx context.Context, w change.Kind, keys []string, from, to int64) ([][]byte, error) {
	if _, ok := change.UniqueWindow(w); !ok {
		return nil, fmt.Errorf("read bucket members: %v is not a window kind", w)
	}
	return s.readSketches(ctx, `SELECT sketch FROM counter_unique_bucket_sketch_text($1, $2, $3, $4)`,
		len(keys), keys, int16(w), time.Unix(from, 0).UTC(), time.Unix(to, 0).UTC())
}

// foldUniqueBuckets unions bucket sketch slot rows into
// counter_unique_bucket_sketches (counter_unique_buckets_fold), after the
// count buckets, and adds how many it folded to res.Rows.
func (s *Store) foldUniqueBuckets(ctx context.Context, _ FoldOptions, res *BucketFoldResult) error {
	n, err := s.foldSketches(ctx, `SELECT counter_unique_buckets_fold($1)`)
	res.Rows += n
	if err != nil {
		return fmt.Errorf("fold bucket sketches: %w", err)
	}
	return nil
}

// expireUniqueBuckets deletes up to chunk folded bucket sketches whose
// keep_until is before at (now() when nil).
func (s *Store) expireUniqueBuckets(ctx context.Context, at *time.Time, chunk int) (int64, error) {
	var n int64
	err := s.retryTx(ctx, func() error {
		return s.pool.QueryRow(ctx, `SELECT counter_unique_buckets_expire($1, $2)`, at, chunk).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("expire bucket sketches: %w", err)
	}
	return n, nil
}
