package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

// get returns a GET's status code and body.
func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// acceptingz asks d's /acceptingz.
func acceptingz(t testing.TB, d *daemon) (int, string) {
	t.Helper()
	return get(t, "http://"+d.metricsAddr()+"/acceptingz")
}

// With PostgreSQL unreachable, /readyz says not ready and /acceptingz
// says accepting, and an increment is acknowledged: a readiness probe on
// /acceptingz keeps the pod in service through the outage.
func TestAcceptingzWithoutDatabase(t *testing.T) {
	t.Parallel()
	dir := shortDir(t)
	d := &daemon{t: t, socket: dir + "/s", env: []string{
		"DATABASE_URL=postgres://u@/x?host=/nonexistent&connect_timeout=1",
		"COUNTERD_SOCKET=" + dir + "/s", "COUNTERD_JOURNAL_DIR=" + dir + "/j",
		"COUNTERD_METRICS_ADDR=127.0.0.1:0", "COUNTERD_SHUTDOWN_TIMEOUT=1s",
	}}
	d.start()
	t.Cleanup(d.kill)
	if err := client(t, d.socket).Incr(context.Background(), "post:1").Err(); err != nil {
		t.Fatalf("INCR without a database: %v", err)
	}
	if code, body := get(t, "http://"+d.metricsAddr()+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz without a database: got %d %q; want 503", code, body)
	}
	if code, body := acceptingz(t, d); code != http.StatusOK || body != "accepting\n" {
		t.Fatalf("/acceptingz without a database: got %d %q; want 200 \"accepting\"", code, body)
	}
}

// While a table lock makes every round fail, /readyz is 503 and
// /acceptingz 200; once the journal reaches COUNTERD_JOURNAL_MAX_BYTES
// and increments get -BUSY, /acceptingz is 503 saying so; once the lock
// is gone and the rounds commit, it is 200 again. Each step waits for
// the state it checks, not for a time.
func TestAcceptingzJournalFull(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_JOURNAL_MAX_BYTES=1048576", "COUNTERD_LOCK_TIMEOUT=200ms", "COUNTERD_FLUSH_INTERVAL=20ms")
	ctx := context.Background()
	c := client(t, d.socket)
	// "counterd ready" is logged just before Serve starts accepting, and
	// /acceptingz is 503 until it has: wait for that, not for the log.
	waitFor(t, 2*time.Minute, "/acceptingz 200 at start", func() bool {
		code, _ := acceptingz(t, d)
		return code == http.StatusOK
	})

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
	waitFor(t, 2*time.Minute, "/readyz 503 while counter_slots is locked", func() bool { return readyz(t, d) == http.StatusServiceUnavailable })
	if code, body := acceptingz(t, d); code != http.StatusOK {
		t.Fatalf("/acceptingz while rounds fail on a lock: got %d %q; want 200", code, body)
	}

	// Rounds cannot commit, so the journal only grows: pipelines of
	// increments of a 256-byte key reach its limit (1 MiB, the least it
	// may be) in some dozens.
	key := strings.Repeat("k", 256)
	busy := false
	for i := 0; i < 10_000 && !busy; i++ {
		cmds, _ := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for range 100 {
				p.Incr(ctx, key)
			}
			return nil
		})
		for _, cmd := range cmds {
			switch err := cmd.Err(); {
			case err != nil && strings.HasPrefix(err.Error(), "BUSY"):
				busy = true
			case err != nil:
				t.Fatalf("INCR in pipeline %d: %v; want OK or -BUSY", i, err)
			}
		}
	}
	if !busy {
		t.Fatal("a million increments into a 1 MiB journal were all accepted")
	}
	code, body := acceptingz(t, d)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "journal full") || !strings.Contains(body, "COUNTERD_JOURNAL_MAX_BYTES is 1048576") {
		t.Fatalf("/acceptingz with the journal at its limit: got %d %q; want 503 naming the full journal", code, body)
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "/acceptingz 200 once rounds commit", func() bool {
		code, _ := acceptingz(t, d)
		return code == http.StatusOK
	})
	if err := c.Incr(ctx, "k").Err(); err != nil {
		t.Fatalf("INCR once /acceptingz is 200 again: %v", err)
	}
}
