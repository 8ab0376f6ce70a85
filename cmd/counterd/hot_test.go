package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

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

// watchHot asks HOT every 10ms while load runs (until done closes, and
// once more after) and returns the sampling factors N it reported for
// each key. HOT reports rates decayed to the moment it answers (half-life
// 1s), so a key is hot while its increments arrive and for a few seconds
// after: asked only once the load is over, HOT answers by how fast the
// machine ran the load and how long it took to ask.
func watchHot(t *testing.T, socket string, done <-chan struct{}) map[string][]int64 {
	t.Helper()
	c := client(t, socket)
	seen := map[string][]int64{}
	for last := false; !last; {
		select {
		case <-done:
			last = true
		case <-time.After(10 * time.Millisecond):
		}
		hot, err := c.Do(context.Background(), "HOT").Slice()
		if err != nil {
			t.Errorf("HOT: %v", err)
			return seen
		}
		for _, h := range hot {
			e := h.([]any)
			seen[e[0].(string)] = append(seen[e[0].(string)], e[2].(int64))
		}
	}
	return seen
}

// summary describes the N values HOT reported for a key.
func summary(ns []int64) string {
	if len(ns) == 0 {
		return "never (not hot)"
	}
	return fmt.Sprintf("from %d to %d in %d answers", slices.Min(ns), slices.Max(ns), len(ns))
}

// underLoad runs load while watchHot watches, and returns what HOT said.
func underLoad(t *testing.T, socket string, load func()) map[string][]int64 {
	t.Helper()
	done := make(chan struct{})
	seen := make(chan map[string][]int64, 1)
	go func() { seen <- watchHot(t, socket, done) }()
	load()
	close(done)
	return <-seen
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
	seen := underLoad(t, d.socket, func() {
		var wg sync.WaitGroup
		wg.Go(func() { sent = hammer(t, d.socket, "view:viral", 200_000) })
		wg.Go(func() { exactSent = hammer(t, d.socket, "post:viral", 100_000) })
		wg.Wait()
	})
	if ns := seen["view:viral"]; !slices.ContainsFunc(ns, func(n int64) bool { return n >= 2 }) {
		t.Fatalf("HOT under load: view:viral had N %s; want it hot with N >= 2", summary(ns))
	}
	if ns := seen["post:viral"]; len(ns) == 0 || slices.ContainsFunc(ns, func(n int64) bool { return n != 1 }) {
		t.Fatalf("HOT under load: post:viral had N %s; want it listed with N 1 (not sampled)", summary(ns))
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
	seen := underLoad(t, d.socket, func() {
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
	})
	if ns := seen["post:viral"]; len(ns) == 0 || slices.ContainsFunc(ns, func(n int64) bool { return n != 1 }) {
		t.Fatalf("HOT under load: post:viral had N %s; want it listed as hot with N 1", summary(ns))
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
