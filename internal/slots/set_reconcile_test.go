package slots_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// setOps applies SADD (add) or SREM of members of key, as one round of
// instance inst, each accepted at at (one microsecond apart).
func setOps(t *testing.T, s *slots.Store, id *store.BatchID, key string, add bool, at time.Time, members ...string) {
	t.Helper()
	var cs []change.Change
	for i, m := range members {
		cs = append(cs, change.SetOpChange(key, []byte(m), at.UnixMicro()+int64(i), add))
	}
	id.Seq++
	mustApply(t, s, *id, cs...)
}

// setMembers lists key's members, sorted.
func setMembers(t *testing.T, db *pgtest.DB, key string) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		`SELECT member FROM counter_set_members WHERE key = $1 AND added_at IS NOT NULL ORDER BY member`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var m []byte
		if err := rows.Scan(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, string(m))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// reconcile calls counter_set_reconcile and returns what it repaired.
func reconcile(t *testing.T, db *pgtest.DB, key string, asOf time.Time, members ...string) (added, removed int64) {
	t.Helper()
	ms := make([][]byte, len(members))
	for i, m := range members {
		ms[i] = []byte(m)
	}
	if err := db.Pool.QueryRow(context.Background(), `SELECT added, removed FROM counter_set_reconcile($1, $2, $3)`,
		key, ms, asOf).Scan(&added, &removed); err != nil {
		t.Fatal(err)
	}
	return added, removed
}

// exec runs statements, failing the test on an error.
func execAll(t *testing.T, db *pgtest.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// counter_set_reconcile repairs a set that drifted from the app's table
// both ways (members lost with their counts, members added behind
// counterd's back with theirs): after it, the set is the app's and the
// total is the member count; a second run repairs nothing.
func TestSetReconcileRepairs(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	id := store.BatchID{Identity: store.Identity{Instance: "r"}}
	const key = "post:1:likes"
	old := time.Now().Add(-time.Hour)
	setOps(t, s, &id, key, true, old, "u1", "u2", "u3", "u4", "u5")
	// Drift: u1 and u2 lost with their counts; x1 and x2 added by hand.
	execAll(t, db,
		`DELETE FROM counter_set_members WHERE key = 'post:1:likes' AND member IN ('u1', 'u2')`,
		// Slot 3 may hold the store's writes already (its home is random).
		`INSERT INTO counter_slots AS cs (key, slot, count) VALUES ('post:1:likes', 3, -2)
			ON CONFLICT (key, slot) DO UPDATE SET count = cs.count + excluded.count`,
		`INSERT INTO counter_set_members (key, member, added_at, changed_at) VALUES
			('post:1:likes', 'x1', now() - interval '1 hour', now() - interval '1 hour'),
			('post:1:likes', 'x2', now() - interval '1 hour', now() - interval '1 hour')`,
		`UPDATE counter_slots SET count = count + 2 WHERE key = 'post:1:likes' AND slot = 3`)
	if got := total(t, db, key); got != 5 {
		t.Fatalf("total before %d; want 5", got)
	}
	app := []string{"u1", "u2", "u3", "u4", "u5", "u6", "u6"} // u6 twice: counted once
	if a, r := reconcile(t, db, key, time.Now(), app...); a != 3 || r != 2 {
		t.Fatalf("reconcile: added %d, removed %d; want 3, 2", a, r)
	}
	want := []string{"u1", "u2", "u3", "u4", "u5", "u6"}
	if got := setMembers(t, db, key); !slices.Equal(got, want) {
		t.Fatalf("members %q; want %q", got, want)
	}
	if got := total(t, db, key); got != 6 {
		t.Fatalf("total %d; want 6, the member count", got)
	}
	if a, r := reconcile(t, db, key, time.Now(), app...); a != 0 || r != 0 {
		t.Fatalf("second reconcile: added %d, removed %d; want nothing", a, r)
	}
	// The removed members are tombstones; the daemon's next SADD of one
	// adds it again (a tombstone is no member).
	setOps(t, s, &id, key, true, time.Now(), "x1")
	if got := total(t, db, key); got != 7 || !slices.Contains(setMembers(t, db, key), "x1") {
		t.Fatalf("after SADD x1: total %d, members %q; want 7 with x1", got, setMembers(t, db, key))
	}
	// An empty array empties the set; NULL is refused.
	if a, r := reconcile(t, db, key, time.Now()); a != 0 || r != 7 {
		t.Fatalf("reconcile to empty: added %d, removed %d; want 0, 7", a, r)
	}
	if got := total(t, db, key); got != 0 {
		t.Fatalf("total %d; want 0", got)
	}
	if _, err := db.Pool.Exec(context.Background(), `SELECT counter_set_reconcile('k', NULL, now())`); err == nil {
		t.Fatal("counter_set_reconcile with NULL members: no error")
	}
}

// A row decided at or after as_of is left alone whichever way it
// differs from the app's snapshot: an SREM accepted after as_of is not
// undone by a member the snapshot still has (this needs the SREM's
// tombstone: with the row deleted, the reconcile would add it back), an
// SADD after as_of is not undone by a snapshot that lacks it, and an
// SREM of a non-member after as_of stops the member being added.
func TestSetReconcileRespectsAsOf(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	id := store.BatchID{Identity: store.Identity{Instance: "r"}}
	const key = "post:2:likes"
	t0 := time.Now().Add(-time.Hour)
	setOps(t, s, &id, key, true, t0, "u1", "u2", "u3")
	asOf := t0.Add(10 * time.Minute) // the app's snapshot began here
	setOps(t, s, &id, key, false, asOf.Add(time.Minute), "u1", "u9")
	setOps(t, s, &id, key, true, asOf.Add(time.Minute), "u4")
	// The app's snapshot as of asOf: u1, u2, u3, u9 (the likes u1 and u9
	// were deleted, and u4 added, after it).
	if a, r := reconcile(t, db, key, asOf, "u1", "u2", "u3", "u9"); a != 0 || r != 0 {
		t.Fatalf("reconcile as of before the operations: added %d, removed %d; want nothing", a, r)
	}
	want := []string{"u2", "u3", "u4"}
	if got := setMembers(t, db, key); !slices.Equal(got, want) {
		t.Fatalf("members %q; want %q", got, want)
	}
	if got := total(t, db, key); got != 3 {
		t.Fatalf("total %d; want 3", got)
	}
	// A later snapshot (the app now has u2, u3, u4) wins over them.
	if a, r := reconcile(t, db, key, time.Now(), "u2", "u3", "u5"); a != 1 || r != 1 {
		t.Fatalf("reconcile as of now: added %d, removed %d; want 1, 1", a, r)
	}
	// A reconcile as of an earlier time than a reconcile's repairs leaves
	// them alone too (u4 stays removed, u5 stays).
	if a, r := reconcile(t, db, key, asOf, "u2", "u3", "u4"); a != 0 || r != 0 {
		t.Fatalf("stale reconcile: added %d, removed %d; want nothing", a, r)
	}
	if got, want := setMembers(t, db, key), []string{"u2", "u3", "u5"}; !slices.Equal(got, want) || total(t, db, key) != 3 {
		t.Fatalf("members %q, total %d; want %q, 3", got, total(t, db, key), want)
	}
}

// The rollup's prune deletes tombstones ROLLUP_SET_TOMBSTONE_SLACK old,
// and no member.
func TestSetTombstonesPruned(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	id := store.BatchID{Identity: store.Identity{Instance: "r"}}
	const key = "post:3:likes"
	setOps(t, s, &id, key, true, time.Now().Add(-3*time.Hour), "u1", "u2", "u3")
	setOps(t, s, &id, key, false, time.Now().Add(-2*time.Hour), "u1", "u7")
	setOps(t, s, &id, key, false, time.Now(), "u2")
	var rows int
	count := func() int {
		t.Helper()
		if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM counter_set_members WHERE key = $1`, key).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	if got := count(); got != 4 {
		t.Fatalf("%d rows; want 4 (u3, and the tombstones of u1, u2, u7)", got)
	}
	pruned, err := s.Prune(context.Background(), slots.PruneOptions{SetTombstoneSlack: time.Hour, Chunk: 1})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range pruned {
		if p.Name == "pruned_set_tombstones" {
			n = p.Rows
		}
	}
	if n != 2 || count() != 2 {
		t.Fatalf("pruned %d (%v), %d rows left; want 2 pruned (u1, u7), 2 left", n, pruned, rows)
	}
	if got := setMembers(t, db, key); !slices.Equal(got, []string{"u3"}) || total(t, db, key) != 1 {
		t.Fatalf("members %q, total %d; want [u3], 1", got, total(t, db, key))
	}
}

// A round saves every row it decided: a member it added gets added_at,
// one that stays keeps it, a removed member and an SREM of a non-member
// become tombstones, and each row's changed_at is its last operation's
// accept time.
func TestSetRoundStampsChangedAt(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	id := store.BatchID{Identity: store.Identity{Instance: "r"}}
	const key = "post:4:likes"
	t0 := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	setOps(t, s, &id, key, true, t0, "a", "b")
	t1 := t0.Add(time.Minute)
	setOps(t, s, &id, key, true, t1, "a", "c") // a is a member already
	setOps(t, s, &id, key, false, t1.Add(time.Minute), "b", "z")
	rows, err := db.Pool.Query(context.Background(),
		`SELECT member, added_at, changed_at FROM counter_set_members WHERE key = $1 ORDER BY member`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var m []byte
		var added *time.Time
		var changed time.Time
		if err := rows.Scan(&m, &added, &changed); err != nil {
			t.Fatal(err)
		}
		a := "NULL"
		if added != nil {
			a = fmt.Sprint(added.Sub(t0))
		}
		got = append(got, fmt.Sprintf("%s %s %v", m, a, changed.Sub(t0)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"a 0s 1m0s", "b NULL 2m0s", "c 1m0.000001s 1m0.000001s", "z NULL 2m0.000001s"}
	if !slices.Equal(got, want) {
		t.Fatalf("rows (member, added_at, changed_at from t0):\n%q\nwant\n%q", got, want)
	}
}

// BenchmarkSetReconcile reconciles a set of 10,000 members: in step with
// the app's list, and with 1% drift each way (100 members lost, 100
// extra), repaired and put back every iteration.
//
//	go test ./internal/slots/ -run '^$' -bench SetReconcile -benchtime 20x
func BenchmarkSetReconcile(b *testing.B) {
	const n = 10000
	db := pgtest.New(b, pgtest.Options{})
	ctx := context.Background()
	app := make([][]byte, n)
	for i := range app {
		app[i] = fmt.Appendf(nil, "user:%06d", i)
	}
	// The set, as a daemon leaves it, an hour ago.
	if _, err := db.Pool.Exec(ctx, `
		INSERT INTO counter_set_members (key, member, added_at, changed_at)
		SELECT 'post:1:likes', m, now() - interval '1 hour', now() - interval '1 hour' FROM unnest($1::bytea[]) AS m;
		`, app); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counter_slots (key, slot, count) VALUES ('post:1:likes', 0, $1)`, n); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, members [][]byte) (added, removed int64) {
		b.Helper()
		if err := db.Pool.QueryRow(ctx, `SELECT added, removed FROM counter_set_reconcile('post:1:likes', $1, now())`, members).Scan(&added, &removed); err != nil {
			b.Fatal(err)
		}
		return added, removed
	}
	b.Run("in step", func(b *testing.B) {
		for b.Loop() {
			if a, r := run(b, app); a+r != 0 {
				b.Fatalf("added %d, removed %d", a, r)
			}
		}
	})
	b.Run("1% drift", func(b *testing.B) {
		// drifted lacks the first 100 and has 100 the set lacks; each
		// iteration reconciles to it and back.
		drifted := append(slices.Clone(app[100:]), make([][]byte, 0, 100)...)
		for i := range 100 {
			drifted = append(drifted, fmt.Appendf(nil, "new:%03d", i))
		}
		for b.Loop() {
			if a, r := run(b, drifted); a != 100 || r != 100 {
				b.Fatalf("added %d, removed %d", a, r)
			}
			if a, r := run(b, app); a != 100 || r != 100 {
				b.Fatalf("back: added %d, removed %d", a, r)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(2*b.N)/1000, "ms/reconcile")
	})
}

// counter_set_reconcile takes the key's set lock shared, as a round
// does: while a DEL or SET of the key holds it exclusive, the reconcile
// waits (here: until its lock_timeout).
func TestSetReconcileTakesSetLock(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only holder
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(1668183140, hashtext('post:1:likes'))`); err != nil {
		t.Fatal(err)
	}
	other, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx) //nolint:errcheck // fails by design
	if _, err := other.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
		t.Fatal(err)
	}
	_, err = other.Exec(ctx, `SELECT counter_set_reconcile('post:1:likes', ARRAY['u1'::bytea], now())`)
	if err == nil || !strings.Contains(err.Error(), "lock timeout") {
		t.Fatalf("reconcile while the set's lock is held exclusive: %v; want a lock timeout", err)
	}
	if _, err := db.Pool.Exec(ctx, `SELECT counter_set_reconcile('post:2:likes', ARRAY['u1'::bytea], now())`); err != nil {
		t.Fatalf("reconcile of another key: %v", err)
	}
}
