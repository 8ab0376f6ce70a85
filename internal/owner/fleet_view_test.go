package owner_test

import (
	"context"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// TestFleetView: counterd_fleet shows each claimed instance with what its
// run reported (version, newest migration, rounds queued at the last
// heartbeat), live by the rule the heartbeat counts the fleet with, and
// when a round of the instance last committed. A run that reports
// nothing (a release before migration 020 taking an instance over) does
// not show the previous run's report as its own.
func TestFleetView(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	const ttl = time.Hour
	claim := func(inst string) {
		t.Helper()
		c := run("g-"+inst, inst)
		c.Instance, c.Version, c.Migration = inst, "v9.9.9", 20
		o, err := acquire(t, db, c, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if inst != "a" {
			return
		}
		counted := make(chan int, 16)
		o.OnFleet(func(n int) { counted <- n })
		o.OnQueued(func() int { return 3 })
		heartbeat(t, o)
		select {
		case <-counted: // the heartbeat that recorded the queue has committed
		case <-time.After(30 * time.Second):
			t.Fatal("no heartbeat")
		}
	}
	claim("b")
	claim("old")
	claim("dead")
	claim("a")
	for _, q := range []string{
		`UPDATE counterd_owners SET heartbeat_at = now() - interval '2 hours' WHERE instance = 'dead'`,
		// What a run of the previous release writes when it takes an
		// instance over: none of the new columns.
		`UPDATE counterd_owners SET generation = 'g-older', pid = 7 WHERE instance = 'old'`,
		`INSERT INTO counterd_instances (instance, last_seq, updated_at) VALUES
			('a.g-a/0', 5, '2026-01-01 00:00:05+00'), ('a.g-a/1', 4, '2026-01-01 00:00:09+00'),
			('a.g-earlier/0', 9, '2026-01-01 00:00:01+00'), ('ab.g-x/0', 1, '2026-02-01 00:00:00+00')`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.Pool.Query(ctx, `
		SELECT instance || ' ' || coalesce(version, '-') || ' ' || coalesce(migration::text, '-') || ' ' || live
		       || ' ' || coalesce(queued_rounds::text, '-') || ' ' || coalesce(to_char(last_commit_at AT TIME ZONE 'UTC', 'MI:SS'), '-')
		FROM counterd_fleet ORDER BY instance`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a v9.9.9 20 true 3 00:09",
		"b v9.9.9 20 true - -",
		"dead v9.9.9 20 false - -",
		"old - - true - -",
	}
	if len(got) != len(want) {
		t.Fatalf("counterd_fleet:\n got %q\nwant %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("counterd_fleet row %d: got %q; want %q", i, got[i], want[i])
		}
	}
}
