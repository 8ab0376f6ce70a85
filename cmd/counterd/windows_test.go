package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

const windowsEnv = "COUNTERD_WINDOWS=post:*=minute:2h,hour:14d,day:400d;view:*=hour:2d"

func unix(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

// storedBuckets reads counter_buckets as "key width start=total" lines.
func storedBuckets(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx,
		`SELECT key, width, bucket_start, total FROM counter_buckets ORDER BY key, width, bucket_start`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var (
			key, width string
			start      time.Time
			total      int64
		)
		if err := rows.Scan(&key, &width, &start, &total); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s=%d\n", key, width, start.UTC().Format(time.RFC3339), total)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// reply runs a command and returns its reply, formatted.
func reply(t *testing.T, c *redis.Client, args ...any) string {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return fmt.Sprint(v)
}

// COUNT SINCE, RANGE and TOP answer from pending increments and from
// PostgreSQL alike, in the buckets of the (pinned) accept clock.
func TestWindowCommands(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	// 10:30:00: every command below runs well within its minute.
	d := startDaemon(t, db, windowsEnv, "COUNTERD_TEST_CLOCK=2026-03-01T10:30:00Z", "COUNTERD_FLUSH_INTERVAL=1h")
	c := client(t, d.socket)
	ctx := context.Background()
	for key, n := range map[string]int64{"post:1": 5, "post:2": 7, "post:3": 1, "view:1": 100, "user:1": 1000} {
		if err := c.IncrBy(ctx, key, n).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Decr(ctx, "post:3").Err(); err != nil {
		t.Fatal(err)
	}
	h8, h9, h10 := unix("2026-03-01T08:00:00Z"), unix("2026-03-01T09:00:00Z"), unix("2026-03-01T10:00:00Z")
	check := func(when string) {
		t.Helper()
		f := func(want string, args ...any) {
			t.Helper()
			if got := reply(t, c, args...); got != want {
				t.Errorf("%s: %v = %s; want %s", when, args, got, want)
			}
		}
		f(fmt.Sprintf("[[%d 0] [%d 0] [%d 5]]", h8, h9, h10), "RANGE", "post:1", "hour", 3)
		f(fmt.Sprintf("[[%d 0] [%d 5]]", unix("2026-03-01T10:29:00Z"), unix("2026-03-01T10:30:00Z")), "RANGE", "post:1", "minute", 2)
		f("[5 exact 0]", "COUNT", "post:1", "SINCE", "24h")
		f("[5 exact 0]", "COUNT", "post:1", "SINCE", "90s")
		f("[5 exact 0]", "COUNT", "post:1", "SINCE", "30d")
		f("[0 exact 0]", "COUNT", "post:3", "SINCE", "1h")
		f("[[post:2 7] [post:1 5]]", "TOP", "post:*", "hour", 24, 10) // post:3 nets 0: left out
		f("[[post:2 7]]", "TOP", "post:*", "day", 1, 1)
		f("[[view:1 100] [post:2 7]]", "TOP", "*", "hour", 2, 2)
	}
	check("pending")
	flush(t, d.socket)
	check("committed")
	want := "post:1 day 2026-03-01T00:00:00Z=5\npost:1 hour 2026-03-01T10:00:00Z=5\npost:1 minute 2026-03-01T10:30:00Z=5\n"
	if got := storedBuckets(t, db.URL); !strings.HasPrefix(got, want) || !strings.Contains(got, "view:1 hour 2026-03-01T10:00:00Z=100\n") || strings.Contains(got, "user:1") {
		t.Errorf("counter_buckets:\n%s\nwant it to start with\n%s and hold view:1's hour and nothing of user:1", got, want)
	}
	if got := total(t, db, "post:1"); got != 5 {
		t.Errorf("post:1 total %d; want 5", got)
	}
}

// Increments accepted before a kill -9 land in the buckets of the time
// they were accepted, after a replay by a daemon whose clock is days
// later: the buckets are in the journal, not picked again at replay.
func TestWindowsSurviveKill9(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, windowsEnv, "COUNTERD_TEST_CLOCK=2026-03-01T10:30:00Z", "COUNTERD_FLUSH_INTERVAL=1h")
	c := client(t, d.socket)
	ctx := context.Background()
	for range 3 {
		if err := c.Incr(ctx, "post:k").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.IncrBy(ctx, "view:k", 10).Err(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := storedBuckets(t, db.URL); got != "" {
		t.Fatalf("buckets stored before the kill:\n%s\nwant none (nothing flushed)", got)
	}
	d.kill()
	for i, e := range d.env {
		if strings.HasPrefix(e, "COUNTERD_TEST_CLOCK=") {
			d.env[i] = "COUNTERD_TEST_CLOCK=2026-03-05T12:00:00Z"
		}
	}
	d.restart()
	c = client(t, d.socket)
	if err := c.Incr(ctx, "post:k").Err(); err != nil {
		t.Fatal(err)
	}
	flush(t, d.socket)
	want := "post:k day 2026-03-01T00:00:00Z=3\n" +
		"post:k day 2026-03-05T00:00:00Z=1\n" +
		"post:k hour 2026-03-01T10:00:00Z=3\n" +
		"post:k hour 2026-03-05T12:00:00Z=1\n" +
		"post:k minute 2026-03-01T10:30:00Z=3\n" +
		"post:k minute 2026-03-05T12:00:00Z=1\n" +
		"view:k hour 2026-03-01T10:00:00Z=10\n"
	if got := storedBuckets(t, db.URL); got != want {
		t.Errorf("counter_buckets after kill -9 and replay:\n%s\nwant\n%s", got, want)
	}
	if got := total(t, db, "post:k"); got != 4 {
		t.Errorf("post:k total %d; want 4", got)
	}
	// A further crash and restart applies nothing again.
	d.kill()
	d.restart()
	flush(t, d.socket)
	if got := storedBuckets(t, db.URL); got != want {
		t.Errorf("counter_buckets after a second restart:\n%s\nwant\n%s", got, want)
	}
}
