package main

import (
	"context"
	"math/rand/v2"
	"sync"
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

// hotN returns the N HOT reports for key, or 0 when key is not hot.
func hotN(t *testing.T, socket, key string) int64 {
	t.Helper()
	hot, err := client(t, socket).Do(context.Background(), "HOT").Slice()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hot {
		if e := h.([]any); e[0] == key {
			return e[2].(int64)
		}
	}
	return 0
}

// Only keys matching COUNTERD_SAMPLE_KEYS are sampled; another hot key is
// counted exactly, and HOT lists both.
func TestHotKeySampled(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_HOT_RATE=500", "COUNTERD_HOT_TARGET=50", "COUNTERD_SAMPLE_KEYS=view:*")
	ctx := context.Background()
	c := client(t, d.socket)
	for range 10 {
		if err := c.Incr(ctx, "view:cold").Err(); err != nil {
			t.Fatal(err)
		}
	}
	var sent, exactSent int64
	var wg sync.WaitGroup
	wg.Go(func() { sent = hammer(t, d.socket, "view:viral", 200_000) })
	wg.Go(func() { exactSent = hammer(t, d.socket, "post:viral", 100_000) })
	wg.Wait()

	if n := hotN(t, d.socket, "view:viral"); n < 2 {
		t.Fatalf("HOT: view:viral has N %d; want it hot with N >= 2", n)
	}
	if n := hotN(t, d.socket, "post:viral"); n != 1 {
		t.Fatalf("HOT: post:viral has N %d; want it listed with N 1 (not sampled)", n)
	}

	flush(t, d.socket)
	total, kind, bound := count(t, d.socket, "view:viral")
	if kind != "estimated" || bound <= 0 {
		t.Fatalf("COUNT view:viral: %d %s ±%d; want an estimate with a bound", total, kind, bound)
	}
	// The 95% bound is 1.96 standard deviations; 2.5 times it is ~5 sigma,
	// so this check does not fail by chance.
	if err := total - sent; err < -5*bound/2 || err > 5*bound/2 {
		t.Fatalf("view:viral: estimate %d of %d sent, ±%d; the error is far outside the bound", total, sent, bound)
	}
	if total, kind, bound := count(t, d.socket, "post:viral"); total != exactSent || kind != "exact" || bound != 0 {
		t.Fatalf("COUNT post:viral: %d %s ±%d; want %d exact ±0", total, kind, bound, exactSent)
	}
	if total, kind, bound := count(t, d.socket, "view:cold"); total != 10 || kind != "exact" || bound != 0 {
		t.Fatalf("COUNT view:cold: %d %s ±%d; want 10 exact ±0", total, kind, bound)
	}

	// SQL readers see the same.
	var (
		sqlTotal, sqlBound int64
		exact              bool
	)
	err := db.Pool.QueryRow(ctx, `SELECT total, exact, error95 FROM counter_estimates WHERE key = 'view:viral'`).Scan(&sqlTotal, &exact, &sqlBound)
	if err != nil {
		t.Fatal(err)
	}
	if sqlTotal != total || exact || sqlBound != bound {
		t.Fatalf("counter_estimates: %d exact=%v ±%d; want %d false ±%d as COUNT says", sqlTotal, exact, sqlBound, total, bound)
	}
	t.Logf("view:viral: %d sent, estimated %d ±%d (95%%)", sent, total, bound)
}

// With the defaults a hot key is counted exactly: 16 clients × 2,000
// unpipelined INCR of one key read back 32,000, not an estimate.
func TestHotKeyExactByDefault(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	// COUNTERD_HOT_RATE low enough that this load is certainly hot on a
	// slow machine; nothing else is set.
	d := startDaemon(t, db, "COUNTERD_HOT_RATE=200")
	ctx := context.Background()
	c := client(t, d.socket)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 2000 {
				if err := c.Incr(ctx, "post:viral").Err(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := hotN(t, d.socket, "post:viral"); n != 1 {
		t.Fatalf("HOT: post:viral has N %d; want it listed as hot with N 1", n)
	}
	flush(t, d.socket)
	if total, kind, bound := count(t, d.socket, "post:viral"); total != 32_000 || kind != "exact" || bound != 0 {
		t.Fatalf("COUNT post:viral: %d %s ±%d; want 32000 exact ±0", total, kind, bound)
	}
	v, err := c.Get(ctx, "post:viral").Int64()
	if err != nil || v != 32_000 {
		t.Fatalf("GET post:viral: %d, %v; want 32000", v, err)
	}
}
