package slots_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// retention gives every key 2h of minute buckets and 14 days of hour
// buckets, and no day buckets.
func retention(key string, k change.Kind) (time.Duration, bool) {
	switch k {
	case change.Minute:
		return 2 * time.Hour, true
	case change.Hour:
		return 14 * 24 * time.Hour, true
	}
	return 0, false
}

func newBucketStore(t *testing.T) (*slots.Store, *pgtest.DB) {
	t.Helper()
	db := pgtest.New(t, pgtest.Options{})
	s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4, Retention: retention})
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

type bucketRow struct {
	key, width string
	start      int64
	total      int64
}

// buckets reads the counter_buckets view, ordered.
func buckets(t *testing.T, db *pgtest.DB) []bucketRow {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		`SELECT key, width, extract(epoch FROM bucket_start)::bigint, total FROM counter_buckets ORDER BY 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []bucketRow
	for rows.Next() {
		var r bucketRow
		if err := rows.Scan(&r.key, &r.width, &r.start, &r.total); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

const t0 = 1_772_359_200 // 2026-03-01T10:00:00Z, the start of an hour

// A round's bucket changes are written in the same exactly-once
// transaction as its totals: a replayed round writes neither again.
func TestApplyOnceWritesBucketsOnce(t *testing.T) {
	t.Parallel()
	s, db := newBucketStore(t)
	ctx := context.Background()
	batch := []change.Change{
		{Key: "post:1", Kind: change.Total, Delta: 5},
		{Key: "post:1", Kind: change.Minute, Bucket: t0 + 120, Delta: 3},
		{Key: "post:1", Kind: change.Minute, Bucket: t0 + 180, Delta: 2},
		{Key: "post:1", Kind: change.Hour, Bucket: t0, Delta: 5},
		{Key: "post:2", Kind: change.Hour, Bucket: t0, Delta: 7, Var: 42},
	}
	id := store.BatchID{Identity: store.Identity{Instance: "w", Generation: "g"}, Seq: 1}
	res, err := s.ApplyOnce(ctx, id, slices.Clone(batch))
	if err != nil {
		t.Fatal(err)
	}
	if res.Inserted+res.Updated != len(batch) {
		t.Errorf("rows written: %d inserted + %d updated; want %d, one per change", res.Inserted, res.Updated, len(batch))
	}
	again, err := s.ApplyOnce(ctx, id, slices.Clone(batch))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate {
		t.Errorf("replayed round: Duplicate = false; want true")
	}
	want := []bucketRow{
		{"post:1", "hour", t0, 5},
		{"post:1", "minute", t0 + 120, 3},
		{"post:1", "minute", t0 + 180, 2},
		{"post:2", "hour", t0, 7},
	}
	if got := buckets(t, db); !slices.Equal(got, want) {
		t.Errorf("counter_buckets = %v; want %v", got, want)
	}
	if got := total(t, db, "post:1"); got != 5 {
		t.Errorf("post:1 total = %d; want 5", got)
	}
	// keep_until is the bucket's end plus the retention of its width.
	var keep time.Time
	err = db.Pool.QueryRow(ctx, `SELECT max(keep_until) FROM counter_bucket_slots WHERE key = 'post:1' AND width = 2`).Scan(&keep)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(t0+180+60, 0).Add(2 * time.Hour); !keep.Equal(want) {
		t.Errorf("keep_until of the last minute bucket = %v; want %v", keep, want)
	}

	snap, err := s.ReadBuckets(ctx, "post:1", change.Minute, t0, t0+3600, []store.Identity{id.Identity})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(snap.Buckets, func(a, b store.BucketValue) int { return int(a.Start - b.Start) })
	if w := []store.BucketValue{{Start: t0 + 120, Total: 3}, {Start: t0 + 180, Total: 2}}; !slices.Equal(snap.Buckets, w) {
		t.Errorf("ReadBuckets = %v; want %v", snap.Buckets, w)
	}
	if got := snap.Marks[0][store.LaneOf("post:1")]; got != 1 {
		t.Errorf("watermark of post:1's lane = %d; want 1", got)
	}
	var exact bool
	var n, e95 int64
	err = db.Pool.QueryRow(ctx, `SELECT * FROM counter_sum_since('post:2', 'hour', to_timestamp($1))`, t0).Scan(&n, &exact, &e95)
	if err != nil {
		t.Fatal(err)
	}
	if n != 7 || exact || e95 != 13 {
		t.Errorf("counter_sum_since(post:2) = %d, %v, %d; want 7, false, 13", n, exact, e95)
	}
	if _, err := db.Pool.Exec(ctx, `SELECT * FROM counter_sum_since('post:2', 'week', now())`); err == nil {
		t.Error("counter_sum_since with width 'week': no error")
	}
}

// Folding moves bucket slot rows into bucket rows without changing any
// bucket's count; expiry then deletes exactly the buckets whose keep_until
// has passed, in chunks.
func TestFoldAndExpireBuckets(t *testing.T) {
	t.Parallel()
	s, db := newBucketStore(t)
	ctx := context.Background()
	var batch []change.Change
	for i := range 20 {
		key := "k" + string(rune('a'+i))
		batch = append(batch,
			change.Change{Key: key, Kind: change.Minute, Bucket: t0, Delta: int64(i + 1)},
			change.Change{Key: key, Kind: change.Hour, Bucket: t0, Delta: int64(i + 1)})
	}
	for seq := range 3 {
		id := store.BatchID{Identity: store.Identity{Instance: "f", Generation: "g"}, Seq: uint64(seq + 1)}
		if _, err := s.ApplyOnce(ctx, id, slices.Clone(batch)); err != nil {
			t.Fatal(err)
		}
	}
	before := buckets(t, db)
	res, err := s.FoldBuckets(ctx, slots.FoldOptions{Chunk: 7})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 40 || res.Buckets != 40 || res.Chunks < 40/7 {
		t.Errorf("fold: %+v; want 40 rows (one slot row per bucket: each round added to the free one) into 40 buckets in at least %d chunks", res, 40/7)
	}
	if got := buckets(t, db); !slices.Equal(got, before) {
		t.Errorf("after fold counter_buckets = %v; want %v", got, before)
	}
	var slotRows int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counter_bucket_slots`).Scan(&slotRows); err != nil {
		t.Fatal(err)
	}
	if slotRows != 0 {
		t.Errorf("bucket slot rows after fold: %d; want 0", slotRows)
	}

	// Minute buckets are kept until 2h after they end, hour buckets 14d.
	minuteGone := time.Unix(t0+60, 0).Add(2*time.Hour + time.Second)
	n, limited, err := s.ExpireBuckets(ctx, minuteGone.Add(-2*time.Second), slots.FoldOptions{Chunk: 3})
	if err != nil || n != 0 || limited {
		t.Fatalf("expire before any keep_until: %d, %v, %v; want 0", n, limited, err)
	}
	n, _, err = s.ExpireBuckets(ctx, minuteGone, slots.FoldOptions{Chunk: 3})
	if err != nil || n != 20 {
		t.Fatalf("expire after the minute buckets' keep_until: %d, %v; want 20", n, err)
	}
	for _, r := range buckets(t, db) {
		if r.width != "hour" {
			t.Errorf("bucket %v left after its retention", r)
		}
	}
	n, _, err = s.ExpireBuckets(ctx, time.Unix(t0+3600, 0).Add(15*24*time.Hour), slots.FoldOptions{})
	if err != nil || n != 20 {
		t.Fatalf("expire after the hour buckets' keep_until: %d, %v; want 20", n, err)
	}
	if got := buckets(t, db); len(got) != 0 {
		t.Errorf("buckets left: %v", got)
	}
}

// A bucket row's keep_until is the latest any write gave it, so a fold of
// an older slot row does not shorten it.
func TestFoldKeepsLatestKeepUntil(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	short, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 1, Retention: func(string, change.Kind) (time.Duration, bool) { return time.Hour, true }})
	if err != nil {
		t.Fatal(err)
	}
	long, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 1, Retention: func(string, change.Kind) (time.Duration, bool) { return 48 * time.Hour, true }})
	if err != nil {
		t.Fatal(err)
	}
	b := []change.Change{{Key: "k", Kind: change.Hour, Bucket: t0, Delta: 1}}
	if _, err := long.Apply(ctx, slices.Clone(b)); err != nil {
		t.Fatal(err)
	}
	if _, err := long.FoldBuckets(ctx, slots.FoldOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := short.Apply(ctx, slices.Clone(b)); err != nil {
		t.Fatal(err)
	}
	if _, err := short.FoldBuckets(ctx, slots.FoldOptions{}); err != nil {
		t.Fatal(err)
	}
	var keep time.Time
	var n int64
	if err := db.Pool.QueryRow(ctx, `SELECT keep_until, total FROM counter_bucket_rows`).Scan(&keep, &n); err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(t0+3600, 0).Add(48 * time.Hour); !keep.Equal(want) || n != 2 {
		t.Errorf("bucket row: keep_until %v, total %d; want %v, 2", keep, n, want)
	}
}
