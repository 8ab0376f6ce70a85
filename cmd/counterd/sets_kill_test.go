package main

import (
	"context"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
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
