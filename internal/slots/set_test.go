package slots_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// That a SET is exact under concurrent folds, and written exactly once,
// is checked by the conformance suite (SetExpire/UnderFold, ExactlyOnce).

func mustApply(t *testing.T, s *slots.Store, id store.BatchID, cs ...change.Change) {
	t.Helper()
	if _, err := s.ApplyOnce(context.Background(), id, cs); err != nil {
		t.Fatal(err)
	}
}

// An expired key reads 0; the next write starts a new life from its delta
// (lazily resetting what was stored); the rollup deletes expired keys in
// chunks; PERSIST (Expire 0) removes an expiry.
func TestExpiry(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	id := store.BatchID{Identity: store.Identity{Instance: "e"}}
	apply := func(cs ...change.Change) {
		t.Helper()
		id.Seq++
		mustApply(t, s, id, cs...)
	}
	past := func(keys ...string) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, `UPDATE counter_expiry SET expires_at = now() - interval '1 second' WHERE key = ANY($1)`, keys); err != nil {
			t.Fatal(err)
		}
	}
	future := time.Now().Add(time.Hour).Unix()
	apply(change.Change{Key: "a", Kind: change.Total, Delta: 5}, change.Change{Key: "b", Kind: change.Total, Delta: 6})
	apply(change.Change{Key: "a", Kind: change.Expire, Delta: future}, change.Change{Key: "b", Kind: change.Expire, Delta: future})
	est, err := s.Estimates(ctx, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	if est[0].Total != 5 || est[0].Expires != future*1000 {
		t.Fatalf("before expiry: got %+v; want total 5 expiring at %d", est[0], future*1000)
	}
	if _, err := s.Fold(ctx, slots.FoldOptions{}); err != nil {
		t.Fatal(err)
	}
	apply(change.Change{Key: "a", Kind: change.Total, Delta: 1}) // a slot row beside the base row
	past("a", "b")
	if got, _ := s.Totals(ctx, []string{"a", "b"}); got[0] != 0 || got[1] != 0 {
		t.Fatalf("expired keys: got %v; want [0 0]", got)
	}
	apply(change.Change{Key: "a", Kind: change.Total, Delta: 2})
	if got := total(t, db, "a"); got != 2 {
		t.Fatalf("increment after expiry: got %d; want 2 (a new life)", got)
	}
	// The rollup deletes b, not a (whose expiry the write removed).
	res, err := s.Expire(ctx, slots.ExpireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Keys != 1 {
		t.Fatalf("expire pass: got %+v; want 1 key", res)
	}
	var rows int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM counters WHERE key = 'b') + (SELECT count(*) FROM counter_slots WHERE key = 'b')`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatalf("rows of the expired key left: %d", rows)
	}
	// PERSIST, and SET clears an expiry.
	apply(change.Change{Key: "a", Kind: change.Expire, Delta: future}, change.Change{Key: "c", Kind: change.Expire, Delta: future})
	apply(change.Change{Key: "a", Kind: change.Expire}, change.Change{Key: "c", Kind: change.Set, Delta: 9})
	var left int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counter_expiry`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("expiry rows after PERSIST and SET: got %d; want 0", left)
	}
}

// The rollup deletes expired keys in chunks of the size asked for.
func TestExpireChunks(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	var cs []change.Change
	for i := range 25 {
		k := fmt.Sprintf("k%02d", i)
		cs = append(cs, change.Change{Key: k, Kind: change.Total, Delta: 1}, change.Change{Key: k, Kind: change.Expire, Delta: 4102444800})
	}
	cs = append(cs, change.Change{Key: "kept", Kind: change.Total, Delta: 1})
	mustApply(t, s, store.BatchID{Identity: store.Identity{Instance: "c"}, Seq: 1}, cs...)
	// Time passes: the rollup runs as of after the expiry (2100-01-01).
	res, err := s.Expire(ctx, slots.ExpireOptions{Chunk: 10, Now: time.Unix(4102444800, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Keys != 25 || res.Chunks != 3 {
		t.Fatalf("got %+v; want 25 keys in 3 chunks", res)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counter_totals`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("keys left: got %d; want 1", n)
	}
}

// COUNTERD_KEY_TTL: each round that writes a matching key moves its idle
// expiry to now plus the retention; an explicit expiry wins; keys that do
// not match get no row.
func TestKeyTTL(t *testing.T) {
	t.Parallel()
	_, db := newStore(t, 4)
	ctx := context.Background()
	s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), KeyTTL: func(k string) time.Duration {
		if k[0] == 's' {
			return time.Hour
		}
		return 0
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := store.BatchID{Identity: store.Identity{Instance: "ttl"}, Seq: 1}
	explicit := time.Now().Add(10 * time.Hour).Unix()
	mustApply(t, s, id, change.Change{Key: "s1", Kind: change.Total, Delta: 1}, change.Change{Key: "s2", Kind: change.Set, Delta: 4},
		change.Change{Key: "s3", Kind: change.Total, Delta: 1}, change.Change{Key: "s3", Kind: change.Expire, Delta: explicit},
		change.Change{Key: "p1", Kind: change.Total, Delta: 1})
	rows, err := db.Pool.Query(ctx, `SELECT key, round(extract(epoch FROM expires_at - now()) / 60)::int, idle IS NOT NULL FROM counter_expiry ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		key  string
		mins int
		idle bool
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.key, &r.mins, &r.idle); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	want := []row{{"s1", 60, true}, {"s2", 60, true}, {"s3", 600, false}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("expiry rows: got %v; want %v", got, want)
	}
}

// A SET of a key the rollup is deleting as expired replaces what is left
// after the rollup commits: it must not subtract the old total it saw
// before the rollup's delete (that left SET 5 of a key holding 100 at
// -95). The SET waits on the rollup's lock on the expiry row, then reads
// the total afresh.
func TestSetWaitsForExpiringRollup(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	mustApply(t, s, store.BatchID{Identity: store.Identity{Instance: "w"}, Seq: 1}, change.Change{Key: "k", Kind: change.Total, Delta: 100})
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counter_expiry (key, expires_at) VALUES ('k', now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	// The rollup's expiry chunk, held open: it has locked the expiry row
	// and deleted the key's rows.
	rollup, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rollup.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	var pid int32
	if err := rollup.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT 1 FROM counter_expiry WHERE key = 'k' FOR UPDATE`,
		`DELETE FROM counter_slots WHERE key = 'k'`,
		`DELETE FROM counters WHERE key = 'k'`,
		`DELETE FROM counter_expiry WHERE key = 'k'`,
	} {
		if _, err := rollup.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.ApplyOnce(ctx, store.BatchID{Identity: store.Identity{Instance: "set"}, Seq: 1},
			[]change.Change{{Key: "k", Kind: change.Set, Delta: 5}})
		done <- err
	}()
	// Commit the rollup once the SET waits on it.
	for waiting := false; !waiting; {
		err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))`, pid).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("SET finished before the rollup committed (%v); want it to wait on the expiry row", err)
		case <-time.After(time.Millisecond):
		}
	}
	if err := rollup.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := total(t, db, "k"); got != 5 {
		t.Fatalf("total after SET 5 raced the rollup's expiry: %d; want 5", got)
	}
}

// DEL of a key never counted leaves no row (a key at 0 and a key never
// counted are the same thing); a SET to the total a key already has adds
// none; DEL of a counted key still zeroes it. Before, DEL wrote a slot row
// of 0, which a fold turned into a counters row.
func TestDelOfUncountedKeyLeavesNothing(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	id := store.BatchID{Identity: store.Identity{Instance: "d"}}
	apply := func(cs ...change.Change) {
		t.Helper()
		id.Seq++
		mustApply(t, s, id, cs...)
	}
	rows := func(key string) int {
		t.Helper()
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM counters WHERE key = $1) + (SELECT count(*) FROM counter_slots WHERE key = $1)`, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	apply(change.Change{Key: "counted", Kind: change.Total, Delta: 5}, change.Change{Key: "same", Kind: change.Total, Delta: 3})
	apply(change.Change{Key: "never", Kind: change.Set}, change.Change{Key: "counted", Kind: change.Set},
		change.Change{Key: "same", Kind: change.Set, Delta: 3})
	if _, err := s.Fold(ctx, slots.FoldOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := rows("never"); got != 0 {
		t.Errorf("DEL of a key never counted: got %d rows; want none", got)
	}
	if got := rows("same"); got != 1 {
		t.Errorf("SET of a key to its own total, folded: got %d rows; want its one counters row", got)
	}
	for key, want := range map[string]int64{"never": 0, "counted": 0, "same": 3} {
		if got := total(t, db, key); got != want {
			t.Errorf("%s: got %d; want %d", key, got, want)
		}
	}
}

// A store that has not seen an expiry writes a round in one statement (it
// used to check counter_expiry in a transaction of its own before each
// round), and still resets a key whose expiry another daemon set and that
// has passed: the statement moves no lane while an expiry exists, and the
// store writes the round again with the reset.
func TestFirstExpiryFromAnotherDaemon(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	var queries atomic.Int64
	cfg.ConnConfig.Tracer = countQueries{&queries}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b, err := slots.New(pool, slots.Options{Kinds: catalog.Writers(), Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	a, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	idA := store.BatchID{Identity: store.Identity{Instance: "a"}, Seq: 1}
	idB := store.BatchID{Identity: store.Identity{Instance: "b"}, Seq: 1}
	mustApply(t, a, idA, change.Change{Key: "k", Kind: change.Total, Delta: 5})

	before := queries.Load()
	mustApply(t, b, idB, change.Change{Key: "k", Kind: change.Total, Delta: 1})
	if n := queries.Load() - before; n != 1 {
		t.Fatalf("a round with no expiry anywhere took %d statements; want 1", n)
	}

	// a sets k's expiry, which then passes; b, which never saw one, writes k.
	idA.Seq++
	mustApply(t, a, idA, change.Change{Key: "k", Kind: change.Expire, Delta: time.Now().Add(time.Hour).Unix()})
	if _, err := db.Pool.Exec(ctx, `UPDATE counter_expiry SET expires_at = now() - interval '1 second' WHERE key = 'k'`); err != nil {
		t.Fatal(err)
	}
	idB.Seq++
	mustApply(t, b, idB, change.Change{Key: "k", Kind: change.Total, Delta: 2})
	if got := total(t, db, "k"); got != 2 {
		t.Fatalf("k after its expiry passed and b added 2: got %d; want 2 (a new life)", got)
	}
	// Replayed, the round is written once.
	mustApply(t, b, idB, change.Change{Key: "k", Kind: change.Total, Delta: 2})
	if got := total(t, db, "k"); got != 2 {
		t.Fatalf("k after b's round was replayed: got %d; want 2", got)
	}
}

// countQueries counts the statements a pool's connections send.
type countQueries struct{ n *atomic.Int64 }

func (c countQueries) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (countQueries) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
