package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/counterd/counterd/internal/bench/loadgen"
	"github.com/counterd/counterd/internal/pgtest"
)

// hammer sends n increments to one key over the socket and returns how
// many were acknowledged.
func hammer(t *testing.T, socket, key string, n int) int64 {
	t.Helper()
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		Network: "unix", Addr: socket, Clients: 4, Pipeline: 50, Requests: n,
		Key: func(*rand.Rand, int, int) string { return key },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 {
		t.Fatalf("%d error replies", res.Errors)
	}
	return res.Ops
}

// count runs COUNT key and returns [total, exactness, error95].
func count(t testing.TB, socket, key string) (int64, string, int64) {
	t.Helper()
	v, err := client(t, socket).Do(context.Background(), "COUNT", key).Slice()
	if err != nil || len(v) != 3 {
		t.Fatalf("COUNT %s: %v, %v", key, v, err)
	}
	return v[0].(int64), v[1].(string), v[2].(int64)
}

func TestHotKeySampled(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_HOT_RATE=500", "COUNTERD_HOT_TARGET=50", "COUNTERD_HOT_STRATEGY=sample")
	ctx := context.Background()
	c := client(t, d.socket)
	for range 10 {
		if err := c.Incr(ctx, "post:cold").Err(); err != nil {
			t.Fatal(err)
		}
	}
	sent := hammer(t, d.socket, "post:viral", 200_000)

	hot, err := c.Do(ctx, "HOT").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(hot) == 0 {
		t.Fatal("HOT: empty while post:viral takes 200,000 increments")
	}
	first := hot[0].([]any)
	if first[0] != "post:viral" || first[2].(int64) < 2 {
		t.Fatalf("HOT: first entry %v; want post:viral with N >= 2", first)
	}

	flush(t, d.socket)
	total, kind, bound := count(t, d.socket, "post:viral")
	if kind != "estimated" || bound <= 0 {
		t.Fatalf("COUNT post:viral: %d %s ±%d; want an estimate with a bound", total, kind, bound)
	}
	// The 95% bound is 1.96 standard deviations; 2.5 times it is ~5 sigma,
	// so this check does not fail by chance.
	if err := total - sent; err < -5*bound/2 || err > 5*bound/2 {
		t.Fatalf("post:viral: estimate %d of %d sent, ±%d; the error is far outside the bound", total, sent, bound)
	}
	if total, kind, bound := count(t, d.socket, "post:cold"); total != 10 || kind != "exact" || bound != 0 {
		t.Fatalf("COUNT post:cold: %d %s ±%d; want 10 exact ±0", total, kind, bound)
	}

	// SQL readers see the same.
	var (
		sqlTotal, sqlBound int64
		exact              bool
	)
	err = db.Pool.QueryRow(ctx, `SELECT total, exact, error95 FROM counter_estimates WHERE key = 'post:viral'`).Scan(&sqlTotal, &exact, &sqlBound)
	if err != nil {
		t.Fatal(err)
	}
	if sqlTotal != total || exact || sqlBound != bound {
		t.Fatalf("counter_estimates: %d exact=%v ±%d; want %d false ±%d as COUNT says", sqlTotal, exact, sqlBound, total, bound)
	}
	t.Logf("post:viral: %d sent, estimated %d ±%d (95%%), hot list %v", sent, total, bound, fmt.Sprint(first))
}

func TestHotKeyExactStrategy(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_HOT_RATE=500", "COUNTERD_HOT_TARGET=50", "COUNTERD_HOT_STRATEGY=exact")
	sent := hammer(t, d.socket, "post:viral", 200_000)
	hot, err := client(t, d.socket).Do(context.Background(), "HOT").Slice()
	if err != nil || len(hot) == 0 {
		t.Fatalf("HOT: %v, %v; want post:viral listed", hot, err)
	}
	if n := hot[0].([]any)[2].(int64); n != 1 {
		t.Fatalf("HOT under the exact strategy: N %d; want 1", n)
	}
	flush(t, d.socket)
	if total, kind, bound := count(t, d.socket, "post:viral"); total != sent || kind != "exact" || bound != 0 {
		t.Fatalf("COUNT post:viral: %d %s ±%d; want %d exact ±0", total, kind, bound, sent)
	}
}
