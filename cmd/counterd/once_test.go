package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// incrOnce sends INCRONCE key visitor window and checks the reply is 1.
func incrOnce(t *testing.T, socket, key, visitor, window string) {
	t.Helper()
	if got := reply(t, client(t, socket), "INCRONCE", key, visitor, window); got != "1" {
		t.Fatalf("INCRONCE %s %s %s: got %s; want 1", key, visitor, window, got)
	}
}

// Two daemons sending views of the same visitors, repeated, and
// committing their rounds at the same time, count each visitor once: the
// decision is PostgreSQL's, not a daemon's.
func TestIncrOnceExactAcrossDaemons(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	env := []string{"COUNTERD_TEST_CLOCK=2026-03-01T10:00:00Z", "COUNTERD_FLUSH_INTERVAL=1h"}
	ds := []*daemon{startDaemon(t, db, env...), startDaemon(t, db, env...)}
	const visitors = 20
	for round := range 2 {
		for _, d := range ds {
			c := client(t, d.socket)
			for v := range visitors {
				for range 2 {
					if got := reply(t, c, "INCRONCE", "post:42:views", fmt.Sprintf("user:%d", v), "8h"); got != "1" {
						t.Fatalf("INCRONCE: got %s; want 1", got)
					}
				}
			}
		}
		// Both daemons' rounds commit at once, deciding the same visitors.
		errs := make(chan error, len(ds))
		for _, d := range ds {
			c := client(t, d.socket)
			go func() {
				// As flush: a FLUSH not confirmed in time (a loaded
				// machine) is asked again, for up to two minutes.
				var err error
				for start := time.Now(); time.Since(start) < 2*time.Minute; {
					if err = c.Do(context.Background(), "FLUSH").Err(); err == nil || !strings.Contains(err.Error(), "flush not confirmed") {
						break
					}
				}
				errs <- err
			}()
		}
		for range ds {
			if err := <-errs; err != nil {
				t.Fatalf("FLUSH: %v", err)
			}
		}
		if got := total(t, db, "post:42:views"); got != visitors {
			t.Fatalf("after round %d: total %d; want %d (each visitor once)", round, got, visitors)
		}
	}
}

// A view accepted before a kill -9 is decided at replay with the time it
// was accepted, not the restarted daemon's: a repeat inside the window
// stays uncounted though the new clock is past it, and a new visitor
// counts once, seen at its accept time. Views after the window (by the
// test clock) count again, once.
func TestIncrOnceReplayAndWindowEdge(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_TEST_CLOCK=2026-03-01T10:00:00Z", "COUNTERD_FLUSH_INTERVAL=1h")
	const key = "post:7:views"
	incrOnce(t, d.socket, key, "user:1", "8h")
	flush(t, d.socket)
	if got := total(t, db, key); got != 1 {
		t.Fatalf("first view: total %d; want 1", got)
	}
	incrOnce(t, d.socket, key, "user:1", "8h") // inside the window
	incrOnce(t, d.socket, key, "user:2", "8h") // new
	d.kill()
	// Nine hours on (the views above were accepted within the hour after
	// 10:00, however slow the machine): past user:1's window.
	for i, e := range d.env {
		if strings.HasPrefix(e, "COUNTERD_TEST_CLOCK=") {
			d.env[i] = "COUNTERD_TEST_CLOCK=2026-03-01T19:00:00Z"
		}
	}
	d.restart()
	flush(t, d.socket)
	if got := total(t, db, key); got != 2 {
		t.Fatalf("after the replay: total %d; want 2 (user:2 counted, user:1's repeat not)\n%s", got, d.log())
	}
	incrOnce(t, d.socket, key, "user:1", "8h") // past the window: counts
	incrOnce(t, d.socket, key, "user:1", "8h") // repeat: does not
	// user:2's counted view is the replayed one, seen at the time it was
	// accepted (before 11:00), not at the replay's 19:00: past its window.
	incrOnce(t, d.socket, key, "user:2", "8h")
	flush(t, d.socket)
	if got := total(t, db, key); got != 4 {
		t.Fatalf("after the window: total %d; want 4 (user:1 and user:2 once more)", got)
	}
}

// INCRONCE's arguments are checked before anything is accepted.
func TestIncrOnceRefuses(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	c := client(t, d.socket)
	for _, args := range [][]any{
		{"INCRONCE", "k", "v", "0s"},
		{"INCRONCE", "k", "v", "soon"},
		{"INCRONCE", "k", "", "8h"},
		{"INCRONCE", "k", "v", "1000000d"},
		{"INCRONCE", "k", "v"},
	} {
		if err := c.Do(context.Background(), args...).Err(); err == nil {
			t.Errorf("%v: accepted; want an error", args)
		}
	}
}

// With COUNTERD_WINDOWS covering the key, counted views land in the
// buckets of their accept time too: COUNT key SINCE span counts
// deduplicated views. A view replayed after a kill -9 by a daemon whose
// clock is days later lands in the bucket it was accepted in.
func TestIncrOnceWindows(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, windowsEnv, "COUNTERD_TEST_CLOCK=2026-03-01T10:30:00Z", "COUNTERD_FLUSH_INTERVAL=1h")
	c := client(t, d.socket)
	for _, v := range []string{"u1", "u2", "u1", "u3", "u2"} {
		incrOnce(t, d.socket, "post:9", v, "8h")
	}
	flush(t, d.socket)
	if got := reply(t, c, "COUNT", "post:9", "SINCE", "24h"); got != "[3 exact 0]" {
		t.Fatalf("COUNT post:9 SINCE 24h: got %s; want [3 exact 0]", got)
	}
	incrOnce(t, d.socket, "post:9", "u4", "8h")
	d.kill()
	for i, e := range d.env {
		if strings.HasPrefix(e, "COUNTERD_TEST_CLOCK=") {
			d.env[i] = "COUNTERD_TEST_CLOCK=2026-03-05T12:00:00Z"
		}
	}
	d.restart()
	flush(t, d.socket)
	want := "post:9 day 2026-03-01T00:00:00Z=4\npost:9 hour 2026-03-01T10:00:00Z=4\n"
	if got := storedBuckets(t, db.URL); !strings.HasPrefix(got, want) {
		t.Fatalf("buckets:\n%s\nwant them to start with\n%s", got, want)
	}
	if got := total(t, db, "post:9"); got != 4 {
		t.Fatalf("total %d; want 4", got)
	}
}
