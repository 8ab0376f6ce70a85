package slots_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hll"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// bucketMembers returns the changes adding m<from>..m<to-1> to key's
// bucket of width w starting at start, and the Go sketch of them.
func bucketMembers(key string, w change.Kind, start int64, from, to int) ([]change.Change, *hll.Sketch) {
	sk := hll.NewDefault()
	var cs []change.Change
	for i := from; i < to; i++ {
		h := hll.Hash(fmt.Appendf(nil, "m%d", i))
		sk.Add(h)
		cs = append(cs, change.BucketMember(key, w, start, h))
	}
	return cs, sk
}

// Bucket sketches in SQL: counter_uniques_since and hll_union_agg over
// counter_unique_buckets are the union of the buckets (a member in two
// buckets counts once), before and after the rollup folds them; the
// rollup deletes buckets past their keep_until (the bucket's end plus the
// key's retention) and only those.
func TestUniqueBuckets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t, pgtest.Options{})
	s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4,
		Retention: func(string, change.Kind) (time.Duration, bool) { return 2 * time.Hour, true }})
	if err != nil {
		t.Fatal(err)
	}
	const h0 = 1_772_359_200 // 2026-03-01T10:00:00Z
	b1, _ := bucketMembers("p", change.Hour, h0, 0, 60)
	b2, _ := bucketMembers("p", change.Hour, h0+3600, 40, 100)
	_, union := bucketMembers("", change.Hour, 0, 0, 100)
	_, second := bucketMembers("", change.Hour, 0, 40, 100)
	id := store.BatchID{Identity: store.Identity{Instance: "ub"}, Seq: 1}
	mustApply(t, s, id, b1...)
	id.Seq++
	mustApply(t, s, id, b2...)

	since := time.Unix(h0, 0).UTC()
	checkBucketSQL(t, db, "slot rows", since, union)
	if _, err := s.FoldBuckets(ctx, slots.FoldOptions{Chunk: 1}); err != nil {
		t.Fatal(err)
	}
	checkBucketSQL(t, db, "folded", since, union)
	var slotRows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counter_unique_bucket_slots`).Scan(&slotRows); err != nil {
		t.Fatal(err)
	}
	if slotRows != 0 {
		t.Errorf("bucket sketch slot rows after a fold: got %d; want 0", slotRows)
	}

	// h0's bucket is kept until h0 + 1h + 2h; h0+1h's an hour longer.
	deleted, _, err := s.ExpireBuckets(ctx, time.Unix(h0+3*3600+1, 0), slots.FoldOptions{Chunk: 1})
	if err != nil || deleted != 1 {
		t.Fatalf("ExpireBuckets past the first bucket's keep_until: got %d, %v; want 1 deleted", deleted, err)
	}
	if got := sqlBucketUnion(t, db, "p", since); got != hexOf(t, second) {
		t.Errorf("after expiry: hll_union_agg over counter_unique_buckets differs from the Go sketch of the second bucket")
	}
	got, err := s.ReadBucketMembers(ctx, change.Hour, []string{"p"}, h0, h0+3600)
	if err != nil {
		t.Fatal(err)
	}
	if sk, err := hll.Parse(got[0]); err != nil || sk.Estimate() != 60 {
		t.Errorf("ReadBucketMembers after expiry: got %v, %v; want 60 members", sk, err)
	}
}

// checkBucketSQL checks p's hour buckets in SQL at a stage: 60 members
// from h0 (since), 60 from h0+1h, 40 of them in both.
func checkBucketSQL(t *testing.T, db *pgtest.DB, stage string, since time.Time, union *hll.Sketch) {
	t.Helper()
	if got := sqlUniquesSince(t, db, "p", "hour", since); got != 100 {
		t.Errorf("%s: counter_uniques_since(p, hour, h0): got %v; want 100 (the union, not 60 + 60)", stage, got)
	}
	if got := sqlUniquesSince(t, db, "p", "hour", since.Add(time.Hour)); got != 60 {
		t.Errorf("%s: counter_uniques_since(p, hour, h0+1h): got %v; want 60", stage, got)
	}
	if got := sqlUniquesSince(t, db, "none", "hour", since); got != 0 {
		t.Errorf("%s: counter_uniques_since of a key without buckets: got %v; want 0", stage, got)
	}
	if got := sqlBucketUnion(t, db, "p", since); got != hexOf(t, union) {
		t.Errorf("%s: hll_union_agg over counter_unique_buckets differs from the Go sketch of the union", stage)
	}
}

func sqlUniquesSince(t *testing.T, db *pgtest.DB, key, width string, since time.Time) float64 {
	t.Helper()
	var n float64
	err := db.Pool.QueryRow(context.Background(), `SELECT estimate FROM counter_uniques_since(ARRAY[$1], $2, $3)`,
		key, width, since).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sqlBucketUnion is hll_union_agg, in plain SQL over the public view, of
// key's hour buckets from since, as hll's text.
func sqlBucketUnion(t *testing.T, db *pgtest.DB, key string, since time.Time) string {
	t.Helper()
	var text string
	err := db.Pool.QueryRow(context.Background(), `SELECT public.hll_union_agg(sketch)::text FROM counter_unique_buckets
		WHERE key = $1 AND width = 'hour' AND bucket_start >= $2`, key, since).Scan(&text)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func hexOf(t *testing.T, sk *hll.Sketch) string {
	t.Helper()
	b, err := sk.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return `\x` + strings.ToLower(hex.EncodeToString(b))
}
