package slots

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/counterd/counterd/internal/store"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/change"
)

// ReadBuckets returns, in one statement, key's stored cells of kind k
// whose bucket is from through to, and the watermarks of ids' lanes, so a
// caller can add the rounds it holds exactly as Read's callers do: for a
// windowed kind its buckets that start from from through to (unix
// seconds), for another kind its one cell (from and to 0), as the kind's
// Writer reads them. A value beyond int64 is an error wrapping
// ErrOverflow.
func (s *Store) ReadBuckets(ctx context.Context, key string, k change.Kind, from, to int64, ids []store.Identity) (store.BucketSnapshot, error) {
	w := s.ws.of(k)
	switch {
	case w != nil && w.readBuckets != nil:
		return w.readBuckets(ctx, s, key, k, from, to, ids)
	case w != nil && w.Read != "" && from == 0 && to == 0:
		return s.readCell(ctx, w.Read, key, ids)
	}
	return store.BucketSnapshot{}, fmt.Errorf("read %v cells of %q from %d to %d: this store cannot read them", k, key, from, to)
}

// readBuckets reads a windowed kind's buckets (the windows' Writer).
func readBuckets(ctx context.Context, s *Store, key string, k change.Kind, from, to int64, ids []store.Identity) (store.BucketSnapshot, error) {
	var snap store.BucketSnapshot
	names, legacy := markNames(ids)
	rows, err := s.pool.Query(ctx, readBucketsSQL, key, int16(k), time.Unix(from, 0), time.Unix(to, 0), names, legacy)
	if err != nil {
		return snap, fmt.Errorf("read buckets: %w", err)
	}
	var (
		start *int64
		total *string
		v     *float64
		seqs  []int64
	)
	_, err = pgx.ForEachRow(rows, []any{&start, &total, &v, &seqs}, func() error {
		if start == nil {
			var merr error
			snap.Marks, merr = toMarks(seqs, len(ids))
			return merr
		}
		n, err := parseCount(key, total)
		if err != nil {
			return err
		}
		snap.Buckets = append(snap.Buckets, store.BucketValue{Start: *start, Total: n, Var: *v})
		return nil
	})
	if err != nil {
		return snap, fmt.Errorf("read buckets: %w", err)
	}
	return snap, nil
}

// readCell reads key's one cell with a Writer's Read SQL, and the
// watermarks of ids' lanes, in one statement.
func (s *Store) readCell(ctx context.Context, read, key string, ids []store.Identity) (store.BucketSnapshot, error) {
	var snap store.BucketSnapshot
	names, legacy := markNames(ids)
	q := `SELECT 0, NULL::text, NULL::float8, ` + readMarks(2) + `
UNION ALL
SELECT 1, r.count::text, r.variance::float8, NULL FROM (` + read + `) AS r`
	rows, err := s.pool.Query(ctx, q, key, names, legacy)
	if err != nil {
		return snap, fmt.Errorf("read %q: %w", key, err)
	}
	var (
		part  int
		count *string
		v     *float64
		seqs  []int64
	)
	_, err = pgx.ForEachRow(rows, []any{&part, &count, &v, &seqs}, func() error {
		if part == 0 {
			var merr error
			snap.Marks, merr = toMarks(seqs, len(ids))
			return merr
		}
		n, err := parseCount(key, count)
		if err != nil {
			return err
		}
		c := store.BucketValue{Total: n}
		if v != nil {
			c.Var = *v
		}
		snap.Buckets = append(snap.Buckets, c)
		return nil
	})
	if err != nil {
		return snap, fmt.Errorf("read %q: %w", key, err)
	}
	return snap, nil
}

// ReadTop returns, in one statement, the n keys starting with prefix with
// the largest stored count over the buckets of kind k that start at or
// after since (counter_trending), the stored counts of keys over the same
// buckets, and the watermarks of ids' lanes.
func (s *Store) ReadTop(ctx context.Context, prefix string, k change.Kind, since int64, n int, keys []string, ids []store.Identity) (store.TopSnapshot, error) {
	snap := store.TopSnapshot{Keys: make([]int64, len(keys))}
	names, legacy := markNames(ids)
	rows, err := s.pool.Query(ctx, readTop, prefix, k.String(), time.Unix(since, 0), n, keys, names, legacy)
	if err != nil {
		return snap, fmt.Errorf("read trending: %w", err)
	}
	var (
		part  int
		ord   *int64
		key   *string
		total *string
		seqs  []int64
	)
	_, err = pgx.ForEachRow(rows, []any{&part, &ord, &key, &total, &seqs}, func() error {
		switch part {
		case 0:
			var merr error
			snap.Marks, merr = toMarks(seqs, len(ids))
			return merr
		case 1:
			n, err := parseCount(*key, total)
			if err != nil {
				return err
			}
			snap.Top = append(snap.Top, store.KeyTotal{Key: *key, Total: n})
		default:
			n, err := parseCount(*key, total)
			if err != nil {
				return err
			}
			snap.Keys[*ord-1] = n
		}
		return nil
	})
	if err != nil {
		return snap, fmt.Errorf("read trending: %w", err)
	}
	return snap, nil
}

// parseCount reads a count sent as text (NULL: beyond int64, as the
// public functions show it).
func parseCount(key string, s *string) (int64, error) {
	if s == nil {
		return 0, fmt.Errorf("count of %q: %w", key, store.ErrOverflow)
	}
	n, err := strconv.ParseInt(*s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count of %q is %s: %w", key, *s, store.ErrOverflow)
	}
	return n, nil
}

// readBucketsSQL is one key's buckets of one width in a range, from the
// primary keys of both bucket tables, with the watermarks of the lanes in
// $5 on a row of their own (start NULL).
var readBucketsSQL = `
SELECT NULL::bigint, NULL::text, NULL::float8, ` + readMarks(5) + `
UNION ALL
SELECT extract(epoch FROM p.bucket_start)::bigint, sum(p.n)::text, sum(p.v)::float8, NULL
FROM (
    SELECT r.bucket_start, r.total AS n, r.variance AS v FROM counter_bucket_rows r
    WHERE r.key = $1 AND r.width = $2 AND r.bucket_start BETWEEN $3 AND $4
    UNION ALL
    SELECT s.bucket_start, s.count, s.variance FROM counter_bucket_slots s
    WHERE s.key = $1 AND s.width = $2 AND s.bucket_start BETWEEN $3 AND $4
) AS p
GROUP BY p.bucket_start`

// readTop is counter_trending (part 1), counter_sum_since of each key in
// $5 (part 2, with its 1-based position) and the watermarks of the lanes
// in $6 (part 0), in one statement.
var readTop = `
SELECT 0, NULL::bigint, NULL::text, NULL::text, ` + readMarks(6) + `
UNION ALL
SELECT 1, NULL, t.key, t.total::text, NULL FROM counter_trending($1, $2, $3, $4) AS t
UNION ALL
SELECT 2, k.ord, k.key, e.total::text, NULL
FROM unnest($5::text[]) WITH ORDINALITY AS k(key, ord)
CROSS JOIN LATERAL counter_sum_since(k.key, $2, $3) AS e`
