package slots

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/change"
)

// Time windows (change.Minute, Hour, Day): a round's bucket changes are
// one CTE of the round statement (bucketsCTE), next to the totals they
// were expanded from, ReadBuckets reads them (read_buckets.go), and the
// rollup folds and expires them (kind_window_fold.go).
//
// WindowsWriter is the Writer of time windows (change.Minute, Hour, Day):
// its part of the round statement, its reads and its rollup fold and
// expiry, one of a store's Options.Kinds.
func WindowsWriter() Writer {
	return Writer{
		Name:        "windows",
		Kinds:       []change.Kind{change.Minute, change.Hour, change.Day},
		inline:      &bucketsPart,
		readBuckets: readBuckets,
		rollup:      rollupPart{foldBuckets: (*Store).foldCountBuckets, expireBuckets: (*Store).expireCountBuckets},
	}
}

// bucketsPart is the windows' part of the round statement: bucketsCTE
// over bucketBatch's arrays and the home slot.
var bucketsPart = inlinePart{
	name:   "bucket_written",
	params: []string{"text[]", "smallint[]", "timestamptz[]", "bigint[]", "float8[]", "smallint[]", "smallint[]", "timestamptz[]", "smallint"},
	cte:    func(p []string, _ bool) string { return bucketsCTE(p) },
	args: func(s *Store, cs []laneChange) []any {
		var b bucketBatch
		for _, c := range cs {
			b.add(s, c)
		}
		return b.args(s.home)
	},
}

// bucketBatch is the windowed changes of one transaction's part, as the
// arrays bucketsCTE takes.
type bucketBatch struct {
	rows []bucketRow
}

type bucketRow struct {
	key      string
	width    int16
	start    time.Time
	n        int64
	v        float64
	fallback int16
	lane     int16
	keep     time.Time
}

// add queues c, a windowed change, with its random fallback slot and the
// time its bucket may be deleted: the bucket's end plus its key's
// retention now.
func (b *bucketBatch) add(s *Store, c laneChange) {
	start := time.Unix(c.Bucket, 0).UTC()
	keep := s.keepUntil(c.Key, c.Kind, start)
	b.rows = append(b.rows, bucketRow{key: c.Key, width: int16(c.Kind), start: start, n: c.Delta, v: c.Var,
		fallback: s.fallbackSlot(), lane: c.lane, keep: keep})
}

// keepUntil is when key's bucket of window kind k starting at start may
// be deleted: its end plus the key's retention now.
func (s *Store) keepUntil(key string, k change.Kind, start time.Time) time.Time {
	keep := start.Add(k.Width())
	if s.retention != nil {
		if d, ok := s.retention(key, k); ok {
			keep = keep.Add(d)
		}
	}
	return keep
}

func (b *bucketBatch) len() int { return len(b.rows) }

// args sorts the rows by primary key, the order every writer locks them
// in, and returns them as bucketsCTE's arrays.
func (b *bucketBatch) args(home int16) []any {
	slices.SortFunc(b.rows, func(x, y bucketRow) int {
		return cmp.Or(strings.Compare(x.key, y.key), cmp.Compare(x.width, y.width), x.start.Compare(y.start))
	})
	n := len(b.rows)
	var (
		keys            = make([]string, n)
		widths, fb, lns = make([]int16, n), make([]int16, n), make([]int16, n)
		starts, keeps   = make([]time.Time, n), make([]time.Time, n)
		deltas          = make([]int64, n)
		vars            = make([]float64, n)
	)
	for i, r := range b.rows {
		keys[i], widths[i], starts[i], deltas[i], vars[i], fb[i], lns[i], keeps[i] =
			r.key, r.width, r.start, r.n, r.v, r.fallback, r.lane, r.keep
	}
	return []any{keys, widths, starts, deltas, vars, fb, lns, keeps, home}
}

// bucketsCTE writes the round's bucket changes by a second INSERT in the
// round statement, so they commit with the totals and the lanes'
// watermarks, exactly once. Each bucket change adds to the first unheld
// slot row of its key, width and bucket (SKIP LOCKED) from the home slot
// on, else gets its row in the home slot or, that row being held, upserts
// into its random other slot, in primary key order, as totals do
// (kind_total.go, with its probe telling new buckets apart); keep_until
// keeps the latest of the writes'. p is its parameters: the arrays of
// bucketBatch.args, then the home slot.
func bucketsCTE(p []string) string {
	home := p[len(p)-1]
	return `bucket_written AS (
    INSERT INTO counter_bucket_slots AS bs (key, width, bucket_start, slot, count, variance, keep_until)
    SELECT b.key, b.width, b.bucket_start, coalesce(f.slot, CASE WHEN e.top IS NULL THEN ` + home + ` ELSE coalesce((
        SELECT s.slot FROM counter_bucket_slots s
        WHERE s.key = b.key AND s.width = b.width AND s.bucket_start = b.bucket_start
          AND s.slot < ` + home + `
        ORDER BY s.slot
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ), CASE WHEN e.top = ` + home + ` THEN b.fallback ELSE ` + home + ` END) END), b.n, b.v, b.keep_until
    FROM unnest(` + strings.Join(p[0:5], ", ") + `,
                ` + strings.Join(p[5:8], ", ") + `)
        AS b(key, width, bucket_start, n, v, fallback, lane, keep_until)
    LEFT JOIN LATERAL (
        SELECT s.slot FROM counter_bucket_slots s
        WHERE s.key = b.key AND s.width = b.width AND s.bucket_start = b.bucket_start
          AND s.slot >= ` + home + `
        ORDER BY s.slot
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS f ON true
    LEFT JOIN LATERAL (
        SELECT s.slot AS top FROM counter_bucket_slots s
        WHERE f.slot IS NULL AND s.key = b.key AND s.width = b.width AND s.bucket_start = b.bucket_start
          AND s.slot <= ` + home + `
        ORDER BY s.slot DESC
        LIMIT 1
    ) AS e ON true
    WHERE ` + lanesParam + ` IS NULL OR (SELECT lanes FROM fresh)[b.lane]
    ON CONFLICT (key, width, bucket_start, slot) DO UPDATE
    SET count = bs.count + excluded.count, variance = bs.variance + excluded.variance,
        keep_until = greatest(bs.keep_until, excluded.keep_until)
    RETURNING bs.xmax = 0 AS created
)`
}
