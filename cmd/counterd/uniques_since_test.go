package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/hll"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

// uniqueWindowsEnv gives u:* hour buckets kept 3 hours after they end and
// day buckets kept 2 days.
const uniqueWindowsEnv = "COUNTERD_WINDOWS=u:*=hour:3h,day:2d"

// goSketch is the Go sketch of members.
func goSketch(members []any) *hll.Sketch {
	sk := hll.NewDefault()
	for _, m := range members {
		sk.Add(hll.Hash([]byte(m.(string))))
	}
	return sk
}

// pfcountSince is PFCOUNT keys... SINCE span.
func pfcountSince(t *testing.T, c *redis.Client, span string, keys ...string) int64 {
	t.Helper()
	args := []any{"PFCOUNT"}
	for _, k := range keys {
		args = append(args, k)
	}
	n, err := c.Do(context.Background(), append(args, "SINCE", span)...).Int64()
	if err != nil {
		t.Fatalf("PFCOUNT %v SINCE %s: %v", keys, span, err)
	}
	return n
}

// setClock changes the accept clock the daemon starts with next.
func setClock(d *daemon, at string) {
	for i, e := range d.env {
		if strings.HasPrefix(e, "COUNTERD_TEST_CLOCK=") {
			d.env[i] = "COUNTERD_TEST_CLOCK=" + at
		}
	}
}

// PFCOUNT key SINCE span is the estimate of the union of the key's
// buckets covering the span: a member added in two hours counts once. It
// reads this daemon's pending members (read-your-writes), survives a
// kill -9 after acknowledged PFADDs (the replay lands in the buckets the
// members were accepted in), equals hll_union_agg over the stored bucket
// sketches in SQL, is unchanged by the rollup's fold, and loses a bucket
// the rollup expired.
func TestUniquesWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, uniqueWindowsEnv, "COUNTERD_TEST_CLOCK=2026-03-01T10:30:00Z",
		"COUNTERD_FLUSH_INTERVAL=1h", "COUNTERD_FSYNC=always")
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(d.log())
		}
	})
	c := client(t, d.socket)
	first, second := memberNames(0, 2000), memberNames(1000, 3000)
	all := goSketch(memberNames(0, 3000))

	// 10:00-11:00: m0..m1999, pending.
	checkFirstHour(t, c, first)
	d.stop()

	// 11:00-12:00: m1000..m2999, the first 100 one PFADD each (the fast
	// path), all acknowledged, then kill -9 before any round commits
	// (the daemon flushes hourly).
	setClock(d, "2026-03-01T11:30:00Z")
	d.restart()
	c = client(t, d.socket)
	pipe := c.Pipeline()
	for _, m := range second[:100] {
		pipe.PFAdd(ctx, "u:1", m)
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if n := cmd.(*redis.IntCmd).Val(); n != 1 {
			t.Fatalf("pipelined PFADD %d of a new member to a windowed key: got %d; want 1", i, n)
		}
	}
	pfaddAll(t, c, "u:1", second[100:])
	pfaddAll(t, c, "u:2", memberNames(2500, 3500))
	since2h := pfcountSince(t, c, "2h", "u:1")
	checkSince := func(stage string) {
		t.Helper()
		if got, want := pfcountSince(t, c, "1h", "u:1"), int64(goSketch(second).Estimate()); got != want {
			t.Fatalf("%s: PFCOUNT u:1 SINCE 1h: got %d; want %d", stage, got, want)
		}
		if got, want := pfcountSince(t, c, "2h", "u:1"), int64(all.Estimate()); got != want || got != since2h {
			t.Fatalf("%s: PFCOUNT u:1 SINCE 2h: got %d; want %d, the union's (a member in two buckets counts once), as before (%d)", stage, got, want, since2h)
		}
		if got, want := pfcountSince(t, c, "1d", "u:1"), int64(all.Estimate()); got != want {
			t.Fatalf("%s: PFCOUNT u:1 SINCE 1d (day bucket): got %d; want %d", stage, got, want)
		}
		if got, want := pfcountSince(t, c, "2h", "u:1", "u:2"), int64(goSketch(memberNames(0, 3500)).Estimate()); got != want {
			t.Fatalf("%s: PFCOUNT u:1 u:2 SINCE 2h: got %d; want %d, the union's", stage, got, want)
		}
	}
	checkSince("pending")
	d.kill()
	var stored int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counter_unique_buckets
		WHERE width = 'hour' AND bucket_start = '2026-03-01T11:00:00Z'`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("before the replay: %d sketches of the 11:00 hour stored, %v; want none (no round committed)", stored, err)
	}
	d.restart()
	c = client(t, d.socket)
	checkSince("after kill -9 and restart")
	flush(t, d.socket)
	checkSince("committed")
	if got := pfcountSince(t, c, "2h", "u:"+strings.Repeat("x", 254)); got != 2 {
		t.Fatalf("PFCOUNT of the 256-byte key SINCE 2h, stored: got %d; want 2", got)
	}
	if got, want := sqlBucketUnion(t, db, "u:1", "2026-03-01T10:00:00Z"), int64(all.Estimate()); got != want {
		t.Fatalf("hll_union_agg over counter_unique_buckets of u:1's hours in SQL: estimate %d; want %d", got, want)
	}

	checkFoldAndExpiry(t, db, c, checkSince, goSketch(second))
}

// sqlBucketUnion is the estimate (Go's estimator) of hll_union_agg, in
// SQL, of key's hour bucket sketches from since.
func sqlBucketUnion(t *testing.T, db *pgtest.DB, key, since string) int64 {
	t.Helper()
	var text string
	if err := db.Pool.QueryRow(context.Background(), `SELECT public.hll_union_agg(sketch)::text FROM counter_unique_buckets
		WHERE key = $1 AND width = 'hour' AND bucket_start >= $2::timestamptz`, key, since).Scan(&text); err != nil {
		t.Fatal(err)
	}
	return int64(parseSketchText(t, text).Estimate())
}

// checkFirstHour adds first to u:1 and 10 members to a key without
// windows, and checks PFCOUNT SINCE reads them pending.
func checkFirstHour(t *testing.T, c *redis.Client, first []any) {
	t.Helper()
	ctx := context.Background()
	pfaddAll(t, c, "u:1", first)
	pfaddAll(t, c, "plain", memberNames(0, 10))
	if got, want := pfcountSince(t, c, "1h", "u:1"), int64(goSketch(first).Estimate()); got != want {
		t.Fatalf("PFCOUNT u:1 SINCE 1h, pending: got %d; want %d", got, want)
	}
	// The longest key: the bucket start packed after it makes 264 bytes.
	long := "u:" + strings.Repeat("x", 254)
	if err := c.PFAdd(ctx, long, "a", "b").Err(); err != nil {
		t.Fatalf("PFADD of a 256-byte windowed key: %v", err)
	}
	if got := pfcountSince(t, c, "1h", long); got != 2 {
		t.Fatalf("PFCOUNT of a 256-byte key SINCE 1h: got %d; want 2", got)
	}
	if got := pfcount(t, c, "plain"); got != 10 {
		t.Fatalf("PFCOUNT of a key without windows: got %d; want 10", got)
	}
	if err := c.Do(ctx, "PFCOUNT", "plain", "SINCE", "1h").Err(); err == nil || !strings.Contains(err.Error(), "no time windows") {
		t.Fatalf("PFCOUNT plain SINCE 1h: got %v; want an error saying the key has no time windows", err)
	}
	if err := c.Do(ctx, "PFCOUNT", "u:1", "SINCE", "3d").Err(); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("PFCOUNT u:1 SINCE 3d, beyond every retention: got %v; want an error naming the retention", err)
	}
}

// checkFoldAndExpiry folds the bucket sketch slot rows, as the rollup
// does, and checks PFCOUNT SINCE (check) is unchanged; then expires the
// 10:00 hour (kept until 14:00; 11:00 until 15:00) and checks PFCOUNT
// u:1 SINCE 2h is the 11:00 hour's sketch, last.
func checkFoldAndExpiry(t *testing.T, db *pgtest.DB, c *redis.Client, check func(string), last *hll.Sketch) {
	t.Helper()
	ctx := context.Background()
	store, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.FoldBuckets(ctx, slots.FoldOptions{}); err != nil {
		t.Fatal(err)
	}
	check("folded")
	if _, _, err := store.ExpireBuckets(ctx, time.Date(2026, 3, 1, 14, 0, 1, 0, time.UTC), slots.FoldOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := pfcountSince(t, c, "2h", "u:1"), int64(last.Estimate()); got != want {
		t.Fatalf("PFCOUNT u:1 SINCE 2h after the 10:00 bucket expired: got %d; want %d, the 11:00 bucket's", got, want)
	}
}
