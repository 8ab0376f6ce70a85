package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/store"
)

// An SADD and an SREM accepted (journaled), then the daemon killed -9
// while their round waits on a member row another transaction holds, so
// it cannot commit: the restarted daemon replays them, once. The set ends
// as the operations say, its cardinality equals its member rows, and a
// second kill and restart after the replay committed changes nothing.
func TestSetsReplayAfterKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	const key = "post:3:likes"
	if got := reply(t, client(t, d.socket), "SADD", key, "user:1", "user:4"); got != "2" {
		t.Fatalf("SADD: got %s; want 2", got)
	}
	accepted := metric(t, d, "counterd_increments_accepted_total")

	// Hold user:1's and user:4's rows: a round deciding either waits.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) }) //nolint:errcheck // a no-op once rolled back
	if _, err := tx.Exec(ctx, `SELECT 1 FROM counter_set_members WHERE key = $1 AND member IN ('user:1'::bytea, 'user:4'::bytea) FOR UPDATE`, key); err != nil {
		t.Fatal(err)
	}
	// Each on its own connection (the SADD of three members on the slow
	// path, the SREM of one on the fast path), perhaps in rounds of their
	// own: each waits for its round's commit, which never comes; the kill
	// ends both with an error.
	replied := make(chan error, 2)
	for _, args := range [][]any{{"SADD", key, "user:1", "user:2", "user:3"}, {"SREM", key, "user:4"}} {
		c := client(t, d.socket)
		go func() { replied <- c.Do(context.Background(), args...).Err() }()
	}
	// Accepted: the four operations are journaled. Then the round is
	// held on the row (a backend of the daemon waits for a lock).
	waitFor(t, 30*time.Second, "the four operations accepted", func() bool {
		return metric(t, d, "counterd_increments_accepted_total") >= accepted+4
	})
	waitFor(t, 30*time.Second, "a round waiting on a held row", func() bool {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	d.kill()
	for range 2 {
		if err := <-replied; err == nil {
			t.Fatal("a set operation replied though its round could not commit")
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing of the killed round committed.
	if got, rows := total(t, db, key), setRows(t, db, key); got != 2 || rows != 2 {
		t.Fatalf("after the kill: total %d, member rows %d; want 2 and 2 (the round did not commit)", got, rows)
	}

	check := func(when string) {
		t.Helper()
		c := client(t, d.socket)
		if got := reply(t, c, "SMISMEMBER", key, "user:1", "user:2", "user:3", "user:4"); got != "[1 1 1 0]" {
			t.Fatalf("%s: SMISMEMBER user:1..4: got %s; want [1 1 1 0]\n%s", when, got, d.log())
		}
		if got, rows := total(t, db, key), setRows(t, db, key); got != 3 || rows != 3 {
			t.Fatalf("%s: total %d, member rows %d; want 3 and 3 (each operation once)\n%s", when, got, rows, d.log())
		}
		if got := reply(t, c, "SCARD", key); got != "3" {
			t.Fatalf("%s: SCARD %s; want 3", when, got)
		}
	}
	d.restart()
	flush(t, d.socket)
	check("after the replay")
	// Replayed and committed: a second kill and replay finds the rounds
	// done and applies nothing again.
	d.kill()
	d.restart()
	flush(t, d.socket)
	check("after a second restart")
}

// A daemon's journal replayed hours after it accepted its operations,
// once another daemon committed newer operations on the same members: the
// replayed operations apply when their round commits, after the other's,
// however old their accept-time tokens. Tokens order one daemon's
// operations (accept order); across daemons the order is commit order,
// so the last to commit wins. A member the replay adds has its SADD's
// accept time as added_at, hours before it was committed; one the replay
// finds a member keeps the added_at of the SADD that added it.
func TestSetsReplayHoursLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t, pgtest.Options{})
	// a's accept clock runs three hours behind: its tokens are that old.
	hoursAgo := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	a := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h", "COUNTERD_TEST_CLOCK="+hoursAgo.Format(time.RFC3339))
	b := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=20ms")
	const key = "post:7:likes"
	bc := client(t, b.socket)
	want := func(args ...any) func(string) {
		return func(w string) {
			t.Helper()
			if got := reply(t, bc, args...); got != w {
				t.Fatalf("%v: %s; want %s", args, got, w)
			}
		}
	}
	want("SADD", key, "user:1")("1")
	accepted := metric(t, a, "counterd_increments_accepted_total")

	// Hold the set's lock (slots' keyLock: every round deciding the set
	// takes it shared), so each of a's rounds on the set waits, however
	// a splits its operations into rounds.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) }) //nolint:errcheck // a no-op once rolled back
	var holder int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM (SELECT pg_advisory_xact_lock(1668183140, hashtext($1))) AS l`, key).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	// a accepts SREM user:1 and SADD user:2 user:3 (journaled, tokens
	// three hours old); their rounds wait on the lock, a is killed.
	replied := make(chan error, 2)
	for _, args := range [][]any{{"SREM", key, "user:1"}, {"SADD", key, "user:2", "user:3"}} {
		c := client(t, a.socket)
		go func() { replied <- c.Do(context.Background(), args...).Err() }()
	}
	waitFor(t, 30*time.Second, "a's three operations accepted", func() bool {
		return metric(t, a, "counterd_increments_accepted_total") >= accepted+3
	})
	waitFor(t, 30*time.Second, "a's rounds waiting on the held lock", func() bool {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`, holder).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	a.kill()
	for range 2 {
		if err := <-replied; err == nil {
			t.Fatal("a set operation replied though its round could not commit")
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// Meanwhile b commits newer operations on the same members.
	want("SADD", key, "user:2")("1")
	want("SREM", key, "user:1")("1")
	want("SADD", key, "user:1")("1")
	want("SMISMEMBER", key, "user:1", "user:2", "user:3")("[1 1 0]")

	// a restarts and replays its journal: its SREM user:1 commits last
	// and wins; its SADD user:2 finds a member (added_at stays b's), its
	// SADD user:3 adds one (added_at three hours ago).
	a.restart()
	flush(t, a.socket)
	for _, d := range []*daemon{a, b} {
		if got := reply(t, client(t, d.socket), "SMISMEMBER", key, "user:1", "user:2", "user:3"); got != "[0 1 1]" {
			t.Fatalf("after a's replay: SMISMEMBER user:1..3: %s; want [0 1 1] (commit order: a's replayed SREM user:1 last)\n%s", got, a.log())
		}
	}
	if got, rows := total(t, db, key), setRows(t, db, key); got != 2 || rows != 2 {
		t.Fatalf("after a's replay: total %d, member rows %d; want 2 and 2", got, rows)
	}
	if got := reply(t, bc, "SCARD", key); got != "2" {
		t.Fatalf("after a's replay: SCARD %s; want 2", got)
	}
	addedAt := func(m string) time.Time {
		t.Helper()
		var at time.Time
		if err := db.Pool.QueryRow(ctx, `SELECT added_at FROM counter_set_members WHERE key = $1 AND member = $2::bytea`, key, []byte(m)).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	if at := addedAt("user:2"); time.Since(at) > time.Hour {
		t.Errorf("user:2 added_at %v; want b's SADD's accept time, minutes ago at most", at)
	}
	if at := addedAt("user:3"); at.Before(hoursAgo) || at.After(hoursAgo.Add(time.Hour)) {
		t.Errorf("user:3 added_at %v; want a's SADD's accept time, about %v", at, hoursAgo)
	}
}

// A round whose transactions commit in part: a pipeline's SADD of a key
// in one transaction of a large round (split by lane) commits, the SREM of a key in
// the other waits on a row another transaction holds past
// COUNTERD_LOCK_TIMEOUT and fails, and the round is written again once
// the row is free. Each still replies what its round decided: the
// committed part's outcome is kept, not lost to the attempt that wrote
// the rest (which decides nothing again for the lanes already written).
func TestSetsRepliesOfPartlyCommittedRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h", "COUNTERD_WRITERS=2", "COUNTERD_LOCK_TIMEOUT=100ms", "COUNTERD_FLUSH_TIMEOUT=2m")
	// Two keys whose lanes are in different transactions of a round.
	a, b := "post:a:likes", ""
	for i := 0; b == ""; i++ {
		if k := fmt.Sprintf("post:%d:likes", i); store.LaneOf(k)%2 != store.LaneOf(a)%2 {
			b = k
		}
	}
	c := client(t, d.socket)
	if got := reply(t, c, "SADD", b, "user:1"); got != "1" {
		t.Fatalf("SADD %s user:1: %s; want 1", b, got)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) }) //nolint:errcheck // a no-op once rolled back
	if _, err := tx.Exec(ctx, `SELECT 1 FROM counter_set_members WHERE key = $1 AND member = 'user:1'::bytea FOR UPDATE`, b); err != nil {
		t.Fatal(err)
	}
	// A round of more than 2,000 keys is split in two transactions
	// (COUNTERD_WRITERS=2) by lane: 2,100 increments, then the set
	// operations, whose wait starts the round.
	incrs := c.Pipeline()
	for i := range 2100 {
		incrs.Incr(ctx, fmt.Sprintf("view:%d", i))
	}
	if _, err := incrs.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	pipe := c.Pipeline()
	add := pipe.Do(ctx, "SADD", a, "user:2")
	rem := pipe.Do(ctx, "SREM", b, "user:1")
	done := make(chan error, 1)
	go func() { _, err := pipe.Exec(ctx); done <- err }()
	// a's transaction commits; b's fails on the lock and is retried.
	if !poll(30*time.Second, func() bool { return setRows(t, db, a) == 1 }) {
		t.Fatalf("the SADD's transaction did not commit within 30s\n%s", d.log())
	}
	waitFor(t, 30*time.Second, "an attempt failed on the held row", func() bool { return strings.Contains(d.log(), "lock timeout") })
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("pipeline: %v (SADD: %v, SREM: %v)\n%s", err, add.Err(), rem.Err(), d.log())
	}
	for _, cmd := range []*redis.Cmd{add, rem} {
		if n, err := cmd.Int64(); n != 1 || err != nil {
			t.Errorf("%v: %d, %v; want 1", cmd.Args(), n, err)
		}
	}
	if ga, gb := total(t, db, a), total(t, db, b); ga != 1 || gb != 0 {
		t.Errorf("totals %d and %d; want 1 and 0", ga, gb)
	}
}
