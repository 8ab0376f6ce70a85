package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/counterd/counterd/internal/cluster"
	"github.com/counterd/counterd/internal/pgtest"
)

// sqlExample is one fenced sql block of docs/sql.md.
type sqlExample struct {
	line int
	// kind is what the comment line before the block says, as
	// <!-- example: tables -->: "" (the read interface: one database and
	// the proxy alike), "tables" (reads the tables themselves: one
	// database or a partition) or "definition" (a table's definition,
	// not run).
	kind  string
	stmts []string
}

var exampleMark = regexp.MustCompile(`^<!-- example: (\w+) -->$`)

// sqlExamples returns the fenced sql blocks of the page at path, each
// split into its statements (a statement ends with ; at the end of a
// line).
func sqlExamples(t *testing.T, path string) []sqlExample {
	t.Helper()
	lines := strings.Split(readDoc(t, path), "\n")
	var out []sqlExample
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sql" {
			continue
		}
		indent := lines[i][:strings.Index(lines[i], "`")]
		ex := sqlExample{line: i + 1}
		for j := i - 1; j >= 0; j-- {
			prev := strings.TrimSpace(lines[j])
			if prev == "" {
				continue
			}
			if m := exampleMark.FindStringSubmatch(prev); m != nil {
				ex.kind = m[1]
			}
			break
		}
		var stmt strings.Builder
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			line := strings.TrimPrefix(lines[i], indent)
			stmt.WriteString(line + "\n")
			if strings.HasSuffix(strings.TrimSpace(line), ";") {
				ex.stmts = append(ex.stmts, strings.TrimSpace(stmt.String()))
				stmt.Reset()
			}
		}
		if rest := strings.TrimSpace(stmt.String()); rest != "" {
			t.Fatalf("%s:%d: the block ends without ; after %q", path, ex.line, rest)
		}
		out = append(out, ex)
	}
	return out
}

// exampleConn connects to url with the hll extension's schema after the
// URL's own on its search_path, as docs/sql.md asks of queries of one's
// own that use hll's functions.
func exampleConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `SELECT set_config('search_path', current_setting('search_path') || ', '
		|| (SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
		    WHERE e.extname = 'hll'), false)`); err != nil {
		t.Fatal(err)
	}
	return conn
}

// queryText runs stmt and returns its rows as PostgreSQL prints them
// (simple protocol: text), sorted unless the statement orders them.
func queryText(ctx context.Context, conn *pgx.Conn, stmt string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, stmt, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var cols []string
		for _, v := range rows.RawValues() {
			if v == nil {
				cols = append(cols, "NULL")
			} else {
				cols = append(cols, string(v))
			}
		}
		out = append(out, strings.Join(cols, "|"))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !strings.Contains(stmt, "ORDER BY") {
		slices.Sort(out)
	}
	return out, nil
}

// interfaceOf describes each function and view of conn's first schema
// that is named in names: a function by its arguments and result, a view
// by its columns and their types.
func interfaceOf(t *testing.T, conn *pgx.Conn, names []string) map[string][]string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT p.proname, 'function(' || pg_get_function_identity_arguments(p.oid) || ') ' || pg_get_function_result(p.oid)
		FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY($1)
		UNION ALL
		SELECT c.relname, 'view(' || string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum) || ')'
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'v' AND c.relname = ANY($1)
		GROUP BY c.relname`, names)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for rows.Next() {
		var name, what string
		if err := rows.Scan(&name, &what); err != nil {
			t.Fatal(err)
		}
		out[name] = append(out[name], what)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// TestSQLDocExamples: the proxy database of a cluster of 4 partitions
// has every function and view docs/sql.md names, with the types one
// database has, and after the same commands to a daemon on one database
// and to one on the cluster, every sql example of docs/sql.md answers
// the same on both. An example marked as reading the tables runs on one
// database and on each partition instead.
func TestSQLDocExamples(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const page = "../../docs/sql.md"
	examples := sqlExamples(t, page)
	var both int
	for _, ex := range examples {
		switch ex.kind {
		case "":
			both += len(ex.stmts)
		case "tables", "definition":
		default:
			t.Fatalf("%s:%d: example kind %q; want none, tables or definition", page, ex.line, ex.kind)
		}
	}
	if both < 12 {
		t.Fatalf("%s has %d statements of the read interface; want at least 12 (is the parser broken?)", page, both)
	}

	const windows = "COUNTERD_WINDOWS=post:*=hour:2d"
	db := pgtest.New(t, pgtest.Options{})
	one := startDaemon(t, db, windows)
	c, cl := startCluster(t, 4, windows)

	// Every function or view named on the page is on the proxy, as on
	// one database.
	plain, proxy := exampleConn(t, db.URL), exampleConn(t, c.Proxy.URL)
	var names []string
	for _, m := range regexp.MustCompile("`([a-z_]+)[`(]").FindAllStringSubmatch(readDoc(t, page), -1) {
		names = append(names, m[1])
	}
	want := interfaceOf(t, plain, names)
	if len(want) < 12 {
		t.Fatalf("%s names %d functions and views of the schema: %v; want at least 12", page, len(want), want)
	}
	got := interfaceOf(t, proxy, names)
	for name, w := range want {
		if !slices.Equal(got[name], w) {
			t.Errorf("on the proxy, %s is %q; on one database %q", name, got[name], w)
		}
	}

	// The same writes to both. The examples read hour buckets of now(),
	// so they all run within one hour.
	if left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); left < time.Minute {
		time.Sleep(left) // the real clock must pass the hour: not a wait for an event
	}
	hour := time.Now().Truncate(time.Hour)
	for _, d := range []*daemon{one, cl} {
		rc := client(t, d.socket)
		pipe := rc.Pipeline()
		for i := 1; i <= 50; i++ {
			pipe.IncrBy(ctx, fmt.Sprintf("post:%d", i), int64(i))
			if i == 1 { // an exact set (docs/sql.md, Exact sets), of the same total 2
				pipe.SAdd(ctx, "post:1:likes", "user:1", "user:2")
				continue
			}
			pipe.IncrBy(ctx, fmt.Sprintf("post:%d:likes", i), int64(2*i))
		}
		pipe.PFAdd(ctx, "post:42", "alice", "bob", "carol")
		pipe.PFAdd(ctx, "visitors:2026-11-01", "alice", "bob")
		pipe.PFAdd(ctx, "visitors:2026-11-02", "bob", "dave")
		pipe.Do(ctx, "INCRONCE", "post:42:views", "user:7", "8h")
		pipe.Do(ctx, "BUDGET", "gift", 500)
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		flush(t, d.socket)
	}
	// A total beyond int64, as a rollup pass leaves it in counters.
	const big = `INSERT INTO counters (key, total) VALUES ('huge', 2::numeric ^ 70)`
	if _, err := db.Pool.Exec(ctx, big); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Parts[cluster.Partition("huge", len(c.Parts))].Pool.Exec(ctx, big); err != nil {
		t.Fatal(err)
	}
	// The app's table, in each database the examples run in.
	const posts = `CREATE TABLE posts (id integer PRIMARY KEY, like_count bigint);
		INSERT INTO posts SELECT i, 0 FROM generate_series(1, 50) AS i;
		CREATE TABLE likes (post_id integer, user_id integer, PRIMARY KEY (post_id, user_id));
		INSERT INTO likes VALUES (1, 1), (1, 2), (1, 3)`
	for _, p := range append([]*pgtest.DB{db, c.Proxy}, c.Parts...) {
		if _, err := p.Pool.Exec(ctx, posts); err != nil {
			t.Fatal(err)
		}
	}

	// The read interface answers the same on both. Functions no example
	// calls are called here.
	var stmts []string
	for _, ex := range examples {
		if ex.kind == "" {
			stmts = append(stmts, ex.stmts...)
		}
	}
	stmts = append(stmts,
		`SELECT key, total FROM counter_overflows`,
		`SELECT key, total, exact, variance, error95 FROM counter_estimates(ARRAY['post:7', 'post:8', 'never'])`,
		`SELECT key, sketch FROM counter_unique_sketch_text(ARRAY['post:42', 'visitors:2026-11-01', 'never'])`,
		`SELECT key, estimate FROM counter_uniques(ARRAY['post:42', 'never'])`,
		`SELECT key, sketch FROM counter_unique_bucket_sketch_text(ARRAY['post:42', 'never'], 3::smallint, now() - interval '1 day', now())`,
		`SELECT key, unfolded FROM counter_unfolded(ARRAY['post:3:likes', 'never'])`,
		`SELECT count(*), sum(total) FROM counter_totals`,
		`SELECT count(*) FROM counter_buckets WHERE width = 'hour'`,
		`SELECT count(*) FROM counter_unique_buckets`,
		`SELECT key, remaining, total FROM budget_totals`,
	)
	for _, stmt := range stmts {
		w, err := queryText(ctx, plain, stmt)
		if err != nil {
			t.Errorf("on one database: %s: %v", stmt, err)
			continue
		}
		g, err := queryText(ctx, proxy, stmt)
		if err != nil {
			t.Errorf("on the proxy: %s: %v", stmt, err)
			continue
		}
		if len(w) == 0 {
			t.Errorf("%s: no rows on one database; the test's writes should give it some", stmt)
		}
		if !slices.Equal(g, w) {
			t.Errorf("%s:\non the proxy   %q\non one database %q", stmt, g, w)
		}
	}
	// budget_add's refusal is the same error on the proxy.
	for name, conn := range map[string]*pgx.Conn{"one database": plain, "the proxy": proxy} {
		_, err := conn.Exec(ctx, `SELECT budget_add('gift', -1000000)`)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" || !strings.Contains(pgErr.Message, "below what is granted") {
			t.Errorf("on %s, budget_add below what is granted: %v; want check_violation", name, err)
		}
	}
	if now := time.Now().Truncate(time.Hour); !now.Equal(hour) {
		t.Logf("the hour changed from %v to %v during the test: bucket answers may differ", hour, now)
	}

	// The examples that read the tables run on one database and on every
	// partition (without comparing: each partition has its own keys).
	since := time.Now().Truncate(time.Hour).Add(-23 * time.Hour)
	for _, ex := range examples {
		if ex.kind != "tables" {
			continue
		}
		for _, stmt := range ex.stmts {
			var args []any
			if strings.Contains(stmt, "$1") {
				args = append(args, since)
			}
			if _, err := queryText(ctx, plain, stmt, args...); err != nil {
				t.Errorf("%s:%d on one database: %s: %v", page, ex.line, stmt, err)
			}
			for i, p := range c.Parts {
				conn := exampleConn(t, p.URL)
				if _, err := queryText(ctx, conn, stmt, args...); err != nil {
					t.Errorf("%s:%d on partition %d: %s: %v", page, ex.line, i, stmt, err)
				}
			}
		}
	}
}
