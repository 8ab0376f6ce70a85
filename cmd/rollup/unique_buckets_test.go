package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

// rollup once folds bucket sketch slot rows (windowed unique members)
// into counter_unique_bucket_sketches, leaving each bucket's union as it
// was, and deletes the bucket sketches past their keep_until, and only
// those, as it does count buckets.
func TestOnceFoldsAndExpiresUniqueBuckets(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	store, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4, Retention: func(string, change.Kind) (time.Duration, bool) {
		return 48 * time.Hour, true
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().Unix()
	hour := now - now%3600
	old := hour - 30*24*3600 // kept until 2 days after it ended: long gone
	var batch []change.Change
	for h := range uint64(50) {
		batch = append(batch, change.BucketMember("u:1", change.Hour, hour, h), change.BucketMember("u:1", change.Hour, old, h))
	}
	for range 3 { // three rounds of the same members: up to three slot rows each
		if _, err := store.Apply(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	estimate := func(since time.Time) float64 {
		t.Helper()
		var n float64
		if err := db.Pool.QueryRow(ctx, `SELECT estimate FROM counter_uniques_since(ARRAY['u:1'], 'hour', $1)`, since).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := estimate(time.Unix(old, 0)); got != 50 {
		t.Fatalf("before the rollup: counter_uniques_since(u:1, hour, old): got %v; want 50", got)
	}
	cmd := exec.Command(binary, "once")
	cmd.Env = []string{"DATABASE_URL=" + db.URL, "ROLLUP_LOG_LEVEL=debug"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("rollup once: %v\n%s%s", err, out, stderr.String())
	}
	var slotRows, sketches int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM counter_unique_bucket_slots),
		(SELECT count(*) FROM counter_unique_bucket_sketches)`).Scan(&slotRows, &sketches); err != nil {
		t.Fatal(err)
	}
	if slotRows != 0 || sketches != 1 {
		t.Errorf("after rollup once: %d slot rows, %d folded bucket sketches; want 0 and 1 (the old bucket expired)\n%s", slotRows, sketches, stderr.String())
	}
	if got := estimate(time.Unix(old, 0)); got != 50 {
		t.Errorf("after rollup once: counter_uniques_since(u:1, hour, old): got %v; want 50 (the live bucket's)", got)
	}
}
