package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

// One key whose total passes int64 must not hold back any other key.
// Before, PostgreSQL rejected the whole round ("bigint out of range") and
// the daemon retried it forever: no later increment of any key committed.
func TestOverflowingKeyHoldsBackNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	c := client(t, d.socket)
	ctx := context.Background()
	if err := c.IncrBy(ctx, "k", math.MaxInt64).Err(); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Do(fctx, "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k", "other"} {
		if err := c.Incr(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(fctx, "FLUSH").Err(); err != nil {
		t.Fatalf("FLUSH after a key passed int64: %v\n%s", err, d.log())
	}
	if got := total(t, db, "other"); got != 1 {
		t.Fatalf("other: got %d; want 1", got)
	}
	if err := c.Get(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "beyond int64") {
		t.Fatalf("GET of a total beyond int64: got %v; want an error saying so", err)
	}
	if got, err := c.Get(ctx, "other").Int64(); err != nil || got != 1 {
		t.Fatalf("GET other: got %d, %v; want 1", got, err)
	}
	// Once a rollup pass has folded it, the key is counted in a metric and
	// named in /readyz, which stays 200: rounds still commit.
	store, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Fold(ctx, slots.FoldOptions{}); err != nil {
		t.Fatalf("fold a total beyond int64: %v", err)
	}
	metricsURL := "http://" + d.metricsAddr() + "/metrics"
	for start := time.Now(); !strings.Contains(httpGet(t, metricsURL), "counterd_overflowed_keys 1"); time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatal("counterd_overflowed_keys did not reach 1 within a minute")
		}
	}
	waitReady(t, d, "1 keys have a total beyond int64")
	if err := c.DecrBy(ctx, "k", 2).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "k").Int64(); err != nil || got != math.MaxInt64-1 {
		t.Fatalf("GET k back in range: got %d, %v; want %d", got, err, int64(math.MaxInt64-1))
	}
	waitReady(t, d, "")
}

// waitReady polls /readyz until it answers 200 with a body containing
// substr. /readyz pings PostgreSQL with a short timeout, which a loaded
// machine can miss now and then: only a minute of not ready fails.
func waitReady(t *testing.T, d *daemon, substr string) {
	t.Helper()
	var last string
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + d.metricsAddr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), substr) {
			return
		}
		last = fmt.Sprintf("%s %q", resp.Status, body)
	}
	t.Fatalf("/readyz: %s; want 200 naming %q", last, substr)
}

// No increment waits on a database query: while one connection's GET
// waits on a locked table, other connections' increments are acknowledged.
// Before, the GET held the read/commit gate, the flusher's swap waited for
// it while holding the append lock, and every INCR on every connection
// stalled until the lock was released.
func TestIncrementsDoNotWaitForSlowReads(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=20ms", "COUNTERD_FLUSH_TIMEOUT=60s", "COUNTERD_LOCK_TIMEOUT=60s")
	ctx := context.Background()
	incr := client(t, d.socket)
	if err := incr.Incr(ctx, "warm").Err(); err != nil {
		t.Fatal(err)
	}
	if err := incr.Do(ctx, "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}

	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE counters, counter_slots IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var released atomic.Bool
	release := func() {
		if released.CompareAndSwap(false, true) {
			_ = tx.Rollback(ctx)
		}
	}
	defer release()
	// The lock is released after 20 s in any case, so a failing daemon
	// fails the test rather than hanging it.
	timer := time.AfterFunc(20*time.Second, release)
	defer timer.Stop()

	reader := redis.NewClient(&redis.Options{Network: "unix", Addr: d.socket, Protocol: 2, DisableIdentity: true, ReadTimeout: time.Minute})
	defer reader.Close()
	got := make(chan error, 1)
	go func() { got <- reader.Get(ctx, "warm").Err() }()
	waitForLockWaiter(t, db)

	// Keys are pending, so the flusher cuts rounds (and fails to write
	// them) while the GET waits.
	for i := range 200 {
		if err := incr.Incr(ctx, "post:"+string(rune('a'+i%26))).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if released.Load() {
		t.Fatal("increments were acknowledged only after the table lock was released")
	}
	release()
	if err := <-got; err != nil {
		t.Fatalf("GET after the lock was released: %v", err)
	}
	flush(t, d.socket)
	if n := total(t, db, "post:a"); n != 8 {
		t.Fatalf("post:a: got %d; want 8", n)
	}
}

// waitForLockWaiter returns once some backend waits for a lock.
func waitForLockWaiter(t testing.TB, db *pgtest.DB) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("no backend waited for the lock within 30s")
}

// readyz returns /readyz's status code.
func readyz(t *testing.T, d *daemon) int {
	t.Helper()
	resp, err := http.Get("http://" + d.metricsAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A journal directory restored from an old snapshot must not lose new
// increments. Before, the next round number came only from the files on
// disk, so the restored daemon numbered its new rounds below the
// database's high-water mark and every one of them was dropped as "already
// committed". Each run now has its own generation in the rounds' identity.
func TestRestoredJournalLosesNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	ctx := context.Background()
	rounds := func(n int) {
		t.Helper()
		c := client(t, d.socket)
		for range n {
			if err := c.Incr(ctx, "k").Err(); err != nil {
				t.Fatal(err)
			}
			flush(t, d.socket)
		}
		c.Close()
	}
	rounds(1)
	d.stop()
	snapshot := d.journal + ".snap"
	copyDir(t, d.journal, snapshot)
	d.restart()
	rounds(5)
	d.stop()
	if err := os.RemoveAll(d.journal); err != nil {
		t.Fatal(err)
	}
	copyDir(t, snapshot, d.journal)
	d.restart()
	rounds(5)
	if got := total(t, db, "k"); got != 11 {
		t.Fatalf("total after restoring the journal directory: got %d; want 11\n%s", got, d.log())
	}
	if strings.Contains(d.log(), "already committed") {
		t.Fatalf("a new round was taken for a committed one:\n%s", d.log())
	}
}

// copyDir copies the regular files of dir src into a new directory dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// /readyz says whether rounds commit. Before, it only pinged the
// database, so it stayed 200 while every round failed (a locked table,
// exhausted connection slots, a wedged key).
func TestReadyzFollowsRounds(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_LOCK_TIMEOUT=200ms", "COUNTERD_FLUSH_INTERVAL=20ms")
	ctx := context.Background()
	c := client(t, d.socket)
	if code := readyz(t, d); code != http.StatusOK {
		t.Fatalf("/readyz at start: %d; want 200", code)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE counter_slots IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if err := c.Incr(ctx, "k").Err(); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); readyz(t, d) != http.StatusServiceUnavailable; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatalf("/readyz stayed 200 for a minute while rounds failed\n%s", d.log())
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	flush(t, d.socket)
	if code := readyz(t, d); code != http.StatusOK {
		t.Fatalf("/readyz once rounds commit again: %d; want 200", code)
	}
	if got := total(t, db, "k"); got != 1 {
		t.Fatalf("k: got %d; want 1", got)
	}
}

// A round whose changes net to nothing (INCR then DECR of one key before
// it is cut) writes no change but must still be committed: its lanes
// record it and the rounds after it follow. Before, the store built a
// round statement with no part and the daemon panicked.
func TestRoundNettingToNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h") // only FLUSH cuts rounds
	c := client(t, d.socket)
	ctx := context.Background()
	if err := c.Incr(ctx, "zero").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Decr(ctx, "zero").Err(); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Do(fctx, "FLUSH").Err(); err != nil {
		t.Fatalf("FLUSH of a round netting to nothing: %v\n%s", err, d.log())
	}
	if err := c.Incr(ctx, "after").Err(); err != nil {
		t.Fatalf("INCR after the empty round: %v\n%s", err, d.log())
	}
	if err := c.Do(fctx, "FLUSH").Err(); err != nil {
		t.Fatalf("FLUSH after the empty round: %v\n%s", err, d.log())
	}
	if got := total(t, db, "after"); got != 1 {
		t.Fatalf("after: got %d; want 1", got)
	}
	if got, err := c.Get(ctx, "zero").Int64(); err != nil || got != 0 {
		t.Fatalf("GET zero: got %d, %v; want 0", got, err)
	}
}
