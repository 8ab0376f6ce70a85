package slots_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/targets"
)

// resolvedTargets parses and resolves spec against db.
func resolvedTargets(tb testing.TB, db *pgtest.DB, spec string) *targets.Set {
	tb.Helper()
	set, err := targets.Parse(spec)
	if err != nil {
		tb.Fatal(err)
	}
	if err := set.Resolve(context.Background(), db.Pool); err != nil {
		tb.Fatal(err)
	}
	return set
}

func mustExec(tb testing.TB, db *pgtest.DB, sql string, args ...any) {
	tb.Helper()
	if _, err := db.Pool.Exec(context.Background(), sql, args...); err != nil {
		tb.Fatalf("%v\n%s", err, sql)
	}
}

// column returns each row's column as text ("NULL" for NULL), by id.
func column(tb testing.TB, db *pgtest.DB, table, col string) map[string]string {
	tb.Helper()
	rows, err := db.Pool.Query(context.Background(),
		`SELECT id::text, coalesce(`+col+`::text, 'NULL') FROM `+table)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var id, v string
		if err := rows.Scan(&id, &v); err != nil {
			tb.Fatal(err)
		}
		out[id] = v
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// A fold adds each matching key's amount to its row's column, NULL as 0;
// a key whose row does not exist, or whose id does not parse, is still
// folded into counters and is reported, not lost; other keys and rows
// are untouched.
func TestFoldTargets(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	mustExec(t, db, `CREATE TABLE posts (id integer PRIMARY KEY, like_count bigint, view_count numeric NOT NULL DEFAULT 0)`)
	mustExec(t, db, `CREATE TABLE users (id uuid PRIMARY KEY, karma integer NOT NULL DEFAULT 100)`)
	mustExec(t, db, `INSERT INTO posts VALUES (1, 10, 0), (2, NULL, 5), (3, 0, 0)`)
	mustExec(t, db, `INSERT INTO users VALUES ('0b7e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b', 100)`)
	mustExec(t, db, `INSERT INTO counter_slots (key, slot, count) VALUES
    ('post:1:likes', 0, 1), ('post:1:likes', 1, 2), ('post:2:likes', 0, 4),
    ('post:1:views', 0, 100), ('post:2:views', 2, -3),
    ('post:404:likes', 0, 7), ('post:x:likes', 0, 8), ('post:01:likes', 0, 9),
    ('user:0b7e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b', 0, 5),
    ('user:0b7e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5c', 3, 6),
    ('other:1', 0, 50)`)
	set := resolvedTargets(t, db, "post:{id}:likes=posts.like_count; post:{id}:views=posts.view_count; user:{id}=users.karma")
	var (
		mu   sync.Mutex
		miss []string
	)
	res, err := s.Fold(ctx, slots.FoldOptions{Chunk: 3, Targets: set, OnMissing: func(tg *targets.Target, keys []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			miss = append(miss, tg.Pattern+" "+k)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 11 || res.Left != 0 || res.Missing != 4 {
		t.Fatalf("Fold: %+v; want 11 rows, none left, 4 missing", res)
	}
	slices.Sort(miss)
	want := []string{"post:{id}:likes post:01:likes", "post:{id}:likes post:404:likes", "post:{id}:likes post:x:likes",
		"user:{id} user:0b7e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5c"}
	if !slices.Equal(miss, want) {
		t.Errorf("missing: got %q; want %q", miss, want)
	}
	f := func(got map[string]string, want map[string]string) {
		t.Helper()
		js, _ := json.Marshal(got)
		wjs, _ := json.Marshal(want)
		if string(js) != string(wjs) {
			t.Errorf("got %s; want %s", js, wjs)
		}
	}
	f(column(t, db, "posts", "like_count"), map[string]string{"1": "13", "2": "4", "3": "0"})
	f(column(t, db, "posts", "view_count"), map[string]string{"1": "100", "2": "2", "3": "0"})
	f(column(t, db, "users", "karma"), map[string]string{"0b7e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b": "105"})
	// Nothing is lost: every key, with a row or not, is in counters.
	for key, n := range map[string]int64{"post:1:likes": 3, "post:404:likes": 7, "post:x:likes": 8, "post:01:likes": 9, "other:1": 50,
		"user:0b7e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5c": 6} {
		if got := total(t, db, key); got != n {
			t.Errorf("counter_totals %s: got %d; want %d", key, got, n)
		}
	}
}

// A sum past the range of the column's type is a data error: the slot
// row at fault stays in counter_slots (so counter_totals stays exact),
// every other key folds into counters and columns, and once the column
// is widened the next pass folds the row into both.
func TestFoldTargetOverflowSkipsOnlyItsRow(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	mustExec(t, db, `CREATE TABLE posts (id bigint PRIMARY KEY, like_count integer NOT NULL)`)
	mustExec(t, db, `INSERT INTO posts VALUES (1, 0), (2, 2147483640), (3, 0)`)
	mustExec(t, db, `INSERT INTO counter_slots (key, slot, count) VALUES
    ('post:1:likes', 0, 1), ('post:2:likes', 0, 5), ('post:2:likes', 1, 5), ('post:3:likes', 0, 3), ('post:3:likes', 1, 4)`)
	set := resolvedTargets(t, db, "post:{id}:likes=posts.like_count")
	res, err := s.Fold(ctx, slots.FoldOptions{Chunk: 4, Targets: set})
	var rowErr *slots.RowError
	var tgErr *slots.TargetError
	if !errors.As(err, &rowErr) || rowErr.Key != "post:2:likes" || rowErr.Slot != 1 || !errors.As(err, &tgErr) ||
		!strings.Contains(err.Error(), "out of range") || errors.Is(err, store.ErrOverflow) {
		t.Fatalf("Fold: %v; want a RowError for post:2:likes slot 1 from the target, out of range (not store.ErrOverflow)", err)
	}
	if res.Skipped != 1 || res.Left != 1 || res.Rows != 4 {
		t.Fatalf("Fold: %+v; want 4 rows folded, 1 skipped and left", res)
	}
	want := map[string]string{"1": "1", "2": "2147483645", "3": "7"}
	if got := column(t, db, "posts", "like_count"); !mapsEqual(got, want) {
		t.Fatalf("like_count: got %v; want %v", got, want)
	}
	if got := total(t, db, "post:2:likes"); got != 10 {
		t.Fatalf("counter_totals post:2:likes: got %d; want 10 (the skipped row still counts)", got)
	}
	mustExec(t, db, `ALTER TABLE posts ALTER COLUMN like_count TYPE bigint`)
	res, err = s.Fold(ctx, slots.FoldOptions{Chunk: 4, Targets: set})
	if err != nil || res.Rows != 1 || res.Left != 0 {
		t.Fatalf("after widening: %+v, %v; want the skipped row folded", res, err)
	}
	want["2"] = "2147483650"
	if got := column(t, db, "posts", "like_count"); !mapsEqual(got, want) {
		t.Fatalf("like_count after widening: got %v; want %v", got, want)
	}
	if got := total(t, db, "post:2:likes"); got != 10 {
		t.Fatalf("counter_totals post:2:likes: got %d; want 10", got)
	}
}

// A chunk's target update failing for any other reason rolls the whole
// chunk back: its slot rows stay and counters is unchanged.
func TestFoldTargetFailureRollsBackChunk(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	mustExec(t, db, `CREATE TABLE posts (id bigint PRIMARY KEY, like_count bigint NOT NULL DEFAULT 0)`)
	mustExec(t, db, `INSERT INTO posts VALUES (1), (2)`)
	mustExec(t, db, `INSERT INTO counter_slots (key, slot, count) VALUES ('post:1:likes', 0, 1), ('post:2:likes', 0, 2)`)
	set := resolvedTargets(t, db, "post:{id}:likes=posts.like_count")
	// Not a data error: the fold's role loses its right to update posts
	// after the rollup started.
	mustExec(t, db, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'no' USING ERRCODE = 'insufficient_privilege'; END $$`)
	mustExec(t, db, `CREATE TRIGGER refuse BEFORE UPDATE ON posts FOR EACH ROW EXECUTE FUNCTION refuse()`)
	res, err := s.Fold(ctx, slots.FoldOptions{Targets: set})
	if err == nil || !strings.Contains(err.Error(), "target post:{id}:likes=posts.like_count") {
		t.Fatalf("Fold: %+v, %v; want the target's error", res, err)
	}
	if n := slotRows(t, db); n != 2 {
		t.Fatalf("slot rows after a failed chunk: %d; want 2", n)
	}
	var base int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counters`).Scan(&base); err != nil || base != 0 {
		t.Fatalf("counters after a failed chunk: %d rows, %v; want none", base, err)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The documented read of an app table with its counts, at 1M keys: 50
// posts joined to their column's exact value (column plus
// counter_unfolded) and to counter_totals, as planned for literals and
// as a prepared statement's generic plan, read counters and counter_slots
// by index only.
func TestTargetReadPlansAt1MKeys(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	mustExec(t, db, `INSERT INTO counters (key, total) SELECT 'post:' || g || ':likes', g % 1000 FROM generate_series(1, 1000000) AS g`)
	mustExec(t, db, `INSERT INTO counter_slots (key, slot, count) SELECT 'post:' || ((g * 97) % 1000000 + 1) || ':likes', s, 1 FROM generate_series(1, 2000) AS g, generate_series(0, 3) AS s`)
	mustExec(t, db, `CREATE TABLE posts (id integer PRIMARY KEY, like_count bigint NOT NULL DEFAULT 0, title text)`)
	mustExec(t, db, `INSERT INTO posts (id, like_count) SELECT g, g % 1000 FROM generate_series(1, 1000000) AS g`)
	mustExec(t, db, `ANALYZE counters, counter_slots, posts`)
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	check := func(name, sql string) {
		t.Helper()
		var out []byte
		if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+sql).Scan(&out); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, sql)
		}
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("EXPLAIN output %s: %v", out, err)
		}
		var problems []string
		indexes := map[string]bool{}
		plans[0].Plan.walk(func(n planNode) {
			indexes[n.IndexName] = true
			if n.NodeType == "Seq Scan" {
				problems = append(problems, "sequential scan of "+n.RelationName)
			}
			if n.NodeType == "Function Scan" && n.FunctionName != "unnest" {
				problems = append(problems, "function "+n.FunctionName+" not inlined")
			}
		})
		if !indexes["counter_slots_pkey"] {
			problems = append(problems, "no index lookup in counter_slots")
		}
		if !indexes["posts_pkey"] {
			problems = append(problems, "posts not read by its primary key")
		}
		if len(problems) > 0 {
			js, _ := json.MarshalIndent(plans[0].Plan, "", " ")
			t.Errorf("%s: %v; plan:\n%s", name, problems, js)
		}
	}
	for i, q := range []struct{ name, sql string }{
		{"column plus counter_unfolded", `SELECT p.id, p.like_count + u.unfolded AS likes
FROM posts p CROSS JOIN LATERAL counter_unfolded(ARRAY['post:' || p.id || ':likes']) AS u
WHERE p.id BETWEEN $1 AND $2`},
		{"column and counter_totals", `SELECT p.id, p.like_count, t.total
FROM posts p CROSS JOIN LATERAL counter_totals(ARRAY['post:' || p.id || ':likes']) AS t
WHERE p.id BETWEEN $1 AND $2`},
	} {
		exec(`RESET plan_cache_mode`)
		check(q.name, strings.NewReplacer("$1", "500001", "$2", "500050").Replace(q.sql))
		stmt := fmt.Sprintf("tq%d", i)
		exec(fmt.Sprintf("PREPARE %s(int, int) AS %s", stmt, q.sql))
		exec(`SET plan_cache_mode = force_generic_plan`)
		check(q.name+", generic plan", fmt.Sprintf("EXECUTE %s(500001, 500050)", stmt))
	}
	exec(`RESET plan_cache_mode`)
	exec(`DEALLOCATE ALL`)
	// And the answer is the exact one.
	var diff int64
	err = conn.QueryRow(ctx, `SELECT count(*) FROM posts p
CROSS JOIN LATERAL counter_unfolded(ARRAY['post:' || p.id || ':likes']) AS u
CROSS JOIN LATERAL counter_totals(ARRAY['post:' || p.id || ':likes']) AS t
WHERE p.id BETWEEN 1 AND 5000 AND p.like_count + u.unfolded <> t.total`).Scan(&diff)
	if err != nil || diff != 0 {
		t.Fatalf("column + unfolded differs from counter_totals for %d posts (%v); want 0", diff, err)
	}
}

// BenchmarkFoldTargets folds 20,000 slot rows (one per key, keys
// post:N:likes of 20,000 existing posts) in chunks of the default size,
// with no target and with posts.like_count as a target, and reports slot
// rows folded per second: the cost of the column's update.
func BenchmarkFoldTargets(b *testing.B) {
	const rows = 20000
	for _, c := range []struct {
		name string
		spec string
	}{{"targets=0", ""}, {"targets=1", "post:{id}:likes=posts.like_count"}} {
		b.Run(c.name, func(b *testing.B) {
			db := pgtest.New(b, pgtest.Options{})
			s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			mustExec(b, db, `CREATE TABLE posts (id integer PRIMARY KEY, like_count bigint NOT NULL DEFAULT 0, title text)`)
			mustExec(b, db, `INSERT INTO posts (id, title) SELECT g, 'post ' || g FROM generate_series(1, $1::int) AS g`, rows)
			var set *targets.Set
			if c.spec != "" {
				set = resolvedTargets(b, db, c.spec)
			}
			var folded int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				mustExec(b, db, `INSERT INTO counter_slots (key, slot, count) SELECT 'post:' || g || ':likes', 0, 1 FROM generate_series(1, $1::int) AS g`, rows)
				mustExec(b, db, `VACUUM ANALYZE counter_slots`)
				b.StartTimer()
				res, err := s.Fold(ctx, slots.FoldOptions{Targets: set})
				if err != nil {
					b.Fatal(err)
				}
				folded += res.Rows
			}
			b.ReportMetric(float64(folded)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// A fold waiting for the app's lock on a target row holds no slot row: a
// write of the key goes on meanwhile. With one slot a key, the write must
// add to the key's one slot row; before, the fold had locked and deleted
// that row before its target update waited for the app's row lock, so
// the write waited behind the fold until the app let go (rounds, FLUSH
// and GET held up to the lock timeout).
func TestFoldTargetWaitHoldsNoSlotRow(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 1)
	ctx := context.Background()
	mustExec(t, db, `CREATE TABLE posts (id integer PRIMARY KEY, like_count bigint NOT NULL DEFAULT 0)`)
	mustExec(t, db, `INSERT INTO posts VALUES (1, 0)`)
	set := resolvedTargets(t, db, "post:{id}:likes=posts.like_count")
	id := store.BatchID{Identity: store.Identity{Instance: "w"}}
	write := func(ctx context.Context) error {
		id.Seq++
		_, err := s.ApplyOnce(ctx, id, []change.Change{{Key: "post:1:likes", Kind: change.Total, Delta: 1}})
		return err
	}
	if err := write(ctx); err != nil {
		t.Fatal(err)
	}
	// The app holds post 1's row.
	app, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Rollback(ctx)
	if _, err := app.Exec(ctx, `SELECT * FROM posts WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	folded := make(chan error, 1)
	go func() {
		_, err := s.Fold(ctx, slots.FoldOptions{Targets: set})
		folded <- err
	}()
	// Until the fold waits for the app's row lock.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var waiting bool
		// This test's schema names the table in the fold's statement:
		// other tests' backends in the database do not count.
		if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND strpos(query, $1) > 0)`,
			db.Schema+`"."posts"`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fold never waited for the app's row lock")
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := write(wctx); err != nil {
		t.Fatalf("a write while the fold waits for the app's row: %v; want it to go on (the fold holds no slot row)", err)
	}
	if err := app.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-folded; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fold(ctx, slots.FoldOptions{Targets: set}); err != nil {
		t.Fatal(err)
	}
	if got, col := total(t, db, "post:1:likes"), column(t, db, "posts", "like_count")["1"]; got != 2 || col != "2" {
		t.Fatalf("after the folds: total %d, like_count %s; want 2 and 2", got, col)
	}
}
