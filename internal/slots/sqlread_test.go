package slots_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/pgtest"
)

// The SQL read functions of sql/007_read_functions.up.sql are checked here
// against the views they stand in for, and their plans at 200,000 keys.

// seedRows writes base rows and slot rows as given: totals and counts are
// decimal strings so they may lie beyond int64.
type seedRows struct {
	baseKeys, baseTotals []string
	baseVars             []float64
	slotKeys, slotCounts []string
	slotVars             []float64
	slotSlots            []int16
}

func (r *seedRows) base(key, total string, v float64) {
	r.baseKeys = append(r.baseKeys, key)
	r.baseTotals = append(r.baseTotals, total)
	r.baseVars = append(r.baseVars, v)
}

func (r *seedRows) slot(key string, slot int16, count string, v float64) {
	r.slotKeys = append(r.slotKeys, key)
	r.slotSlots = append(r.slotSlots, slot)
	r.slotCounts = append(r.slotCounts, count)
	r.slotVars = append(r.slotVars, v)
}

func (r *seedRows) write(tb testing.TB, db *pgtest.DB) {
	tb.Helper()
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counters (key, total, variance)
SELECT * FROM unnest($1::text[], $2::text[]::numeric[], $3::float8[])`, r.baseKeys, r.baseTotals, r.baseVars); err != nil {
		tb.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counter_slots (key, slot, count, variance)
SELECT * FROM unnest($1::text[], $2::smallint[], $3::text[]::numeric[], $4::float8[])`, r.slotKeys, r.slotSlots, r.slotCounts, r.slotVars); err != nil {
		tb.Fatal(err)
	}
	*r = seedRows{}
}

// randomCounters seeds n keys under a few prefixes (one a prefix of
// another), each with a base row only, slot rows only, or both. Totals are
// small so many tie; slot counts are often negative, so a key with slot
// rows may end below keys it leads in base total. Variances are whole
// numbers so that sums are exact in any order. It returns the keys.
func randomCounters(tb testing.TB, db *pgtest.DB, rng *rand.Rand, n int) []string {
	tb.Helper()
	prefixes := []string{"a:", "ab:", "b:"}
	var rows seedRows
	keys := make([]string, 0, n)
	variance := func() float64 {
		if rng.IntN(4) == 0 {
			return float64(rng.IntN(1000))
		}
		return 0
	}
	for i := range n {
		key := prefixes[rng.IntN(len(prefixes))] + strconv.Itoa(i)
		keys = append(keys, key)
		kind := rng.IntN(3) // 0 base only, 1 slots only, 2 both
		if kind != 1 {
			rows.base(key, strconv.Itoa(rng.IntN(61)-30), variance())
		}
		if kind != 0 {
			for s := range 1 + rng.IntN(4) {
				rows.slot(key, int16(s), strconv.Itoa(rng.IntN(31)-15), variance())
			}
		}
	}
	rows.write(tb, db)
	return keys
}

// beyondInt64 seeds keys at and past the int64 limits, through base rows,
// slot rows, or both, and returns them.
func beyondInt64(tb testing.TB, db *pgtest.DB) []string {
	tb.Helper()
	var rows seedRows
	rows.base("a:max", "9223372036854775807", 0)              // fits exactly
	rows.base("a:over", "9223372036854775807", 0)             // one past, through a slot
	rows.slot("a:over", 0, "1", 0)                            //
	rows.slot("b:slots-over", 0, "9223372036854775807", 0)    // past in slot rows alone
	rows.slot("b:slots-over", 1, "9223372036854775807", 0)    //
	rows.base("b:under", "-9223372036854775808", 5)           // below int64's minimum
	rows.slot("b:under", 0, "-1", 0)                          //
	rows.base("ab:wide", "123456789012345678901234567890", 0) // rolled-up past int64
	rows.base("ab:back", "9223372036854775808", 0)            // past, brought back by a slot
	rows.slot("ab:back", 0, "-1", 0)                          //
	rows.write(tb, db)
	return []string{"a:max", "a:over", "b:slots-over", "b:under", "ab:wide", "ab:back"}
}

// estimateRow is a row of counter_estimates or counter_estimates(keys).
type estimateRow struct {
	Key      string
	Total    *int64
	Exact    bool
	Variance float64
	Error95  int64
}

func (e estimateRow) String() string {
	t := "NULL"
	if e.Total != nil {
		t = strconv.FormatInt(*e.Total, 10)
	}
	return fmt.Sprintf("{%s %s exact=%v var=%v err=%d}", e.Key, t, e.Exact, e.Variance, e.Error95)
}

func queryEstimates(tb testing.TB, db *pgtest.DB, sql string, args ...any) []estimateRow {
	tb.Helper()
	rows, err := db.Pool.Query(context.Background(), sql, args...)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[estimateRow])
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// totalRow is a row of counter_totals, counter_totals(keys) or counter_top.
type totalRow struct {
	Key   string
	Total *int64
}

func (r totalRow) String() string {
	if r.Total == nil {
		return r.Key + "=NULL"
	}
	return r.Key + "=" + strconv.FormatInt(*r.Total, 10)
}

func queryTotals(tb testing.TB, db *pgtest.DB, sql string, args ...any) []totalRow {
	tb.Helper()
	rows, err := db.Pool.Query(context.Background(), sql, args...)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[totalRow])
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestReadFunctionsMatchViews(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	rng := rand.New(rand.NewPCG(7, 7))
	keys := randomCounters(t, db, rng, 400)
	keys = append(keys, beyondInt64(t, db)...)
	// Keys never counted read as exactly 0, and every element of the
	// array gets its row, a repeated one included.
	asked := append(slices.Clone(keys), "never:1", "a:", "", keys[0])

	view := map[string]estimateRow{}
	for _, e := range queryEstimates(t, db, `SELECT key, total, exact, variance, error95 FROM counter_estimates`) {
		view[e.Key] = e
	}
	viewTotals := map[string]totalRow{}
	for _, r := range queryTotals(t, db, `SELECT key, total FROM counter_totals`) {
		viewTotals[r.Key] = r
	}
	zero := int64(0)
	want := func(key string) estimateRow {
		if e, ok := view[key]; ok {
			return e
		}
		return estimateRow{Key: key, Total: &zero, Exact: true}
	}
	sameTotal := func(a, b *int64) bool {
		return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
	}

	check := func(name string, got []estimateRow) {
		t.Helper()
		if len(got) != len(asked) {
			t.Fatalf("%s: got %d rows; want %d (one per array element)", name, len(got), len(asked))
		}
		seen := map[string]int{}
		for _, g := range got {
			seen[g.Key]++
			w := want(g.Key)
			if !sameTotal(g.Total, w.Total) || g.Exact != w.Exact || g.Variance != w.Variance || g.Error95 != w.Error95 {
				t.Errorf("%s: key %q: got %v; want %v", name, g.Key, g, w)
			}
			if v := viewTotals[g.Key]; v.Key != "" && !sameTotal(v.Total, w.Total) {
				t.Errorf("views disagree on %q: counter_totals %v; counter_estimates %v", g.Key, v, w)
			}
		}
		for _, k := range asked {
			seen[k]--
		}
		for k, n := range seen {
			if n != 0 {
				t.Errorf("%s: key %q: got %d more rows than asked for", name, k, n)
			}
		}
	}

	check("counter_estimates(keys)", queryEstimates(t, db,
		`SELECT key, total, exact, variance, error95 FROM counter_estimates($1::text[])`, asked))

	var totals []estimateRow
	for _, r := range queryTotals(t, db, `SELECT key, total FROM counter_totals($1::text[])`, asked) {
		w := want(r.Key) // counter_totals has no exactness: take it from the view
		totals = append(totals, estimateRow{Key: r.Key, Total: r.Total, Exact: w.Exact, Variance: w.Variance, Error95: w.Error95})
	}
	check("counter_totals(keys)", totals)

	// The join shape docs/sql.md gives: one lateral call per row.
	var joined []estimateRow
	for _, r := range queryTotals(t, db, `SELECT t.key, t.total
FROM unnest($1::text[]) AS p(k) CROSS JOIN LATERAL counter_totals(ARRAY[p.k]) AS t`, asked) {
		w := want(r.Key)
		joined = append(joined, estimateRow{Key: r.Key, Total: r.Total, Exact: w.Exact, Variance: w.Variance, Error95: w.Error95})
	}
	check("lateral counter_totals(ARRAY[key])", joined)

	if got := queryTotals(t, db, `SELECT key, total FROM counter_totals(NULL)`); len(got) != 0 {
		t.Errorf("counter_totals(NULL): got %v; want no rows", got)
	}
}

// counter_top must return exactly what sorting the whole view returns.
func TestCounterTopIsExact(t *testing.T) {
	t.Parallel()
	prefixes := []*string{nil, new(""), new("a"), new("a:"), new("ab:"), new("b:"), new("zz")}
	ns := []int{0, 1, 2, 5, 10, 37, 1000}
	compare := func(db *pgtest.DB, label, reference string) {
		t.Helper()
		for _, p := range prefixes {
			for _, n := range ns {
				got := queryTotals(t, db, `SELECT key, total FROM counter_top($1, $2)`, n, p)
				want := queryTotals(t, db, reference, n, p)
				if !slices.EqualFunc(got, want, func(a, b totalRow) bool { return a.String() == b.String() }) {
					ps := "NULL"
					if p != nil {
						ps = strconv.Quote(*p)
					}
					t.Errorf("%s: counter_top(%d, %s):\n got %v\nwant %v", label, n, ps, got, want)
				}
			}
		}
	}
	for seed := range uint64(3) {
		db := pgtest.New(t, pgtest.Options{})
		randomCounters(t, db, rand.New(rand.NewPCG(seed, 11)), 300)
		// The naive query, ties broken by key so the order is defined.
		compare(db, fmt.Sprintf("seed %d", seed), `SELECT key, total FROM counter_totals
WHERE $2::text IS NULL OR starts_with(key, $2)
ORDER BY total DESC, key LIMIT $1`)

		// Past int64 the view's total is NULL, so sorting it would put
		// every such key first; counter_top ranks by the exact total.
		beyondInt64(t, db)
		compare(db, fmt.Sprintf("seed %d, beyond int64", seed), `SELECT v.key, v.total
FROM counter_totals AS v
JOIN (SELECT key, sum(n) AS exact FROM (
          SELECT key, total AS n FROM counters
          UNION ALL
          SELECT key, count FROM counter_slots
      ) AS parts GROUP BY key) AS e USING (key)
WHERE $2::text IS NULL OR starts_with(v.key, $2)
ORDER BY e.exact DESC, v.key LIMIT $1`)
	}
}

// seedPosts writes keys counters "post:1".."post:<keys>" with base totals,
// slot rows for 2,000 of them (four each, some negative) and 500 keys that
// are only in slot rows ("new:1".."new:500"), and a posts table with ids
// 1..keys, then analyzes them: a deployment between two rollup passes.
func seedPosts(tb testing.TB, db *pgtest.DB, keys int) {
	tb.Helper()
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO counters (key, total) SELECT 'post:' || g, (g::bigint * 7919) % 1000003 FROM generate_series(1, $1::int) AS g`,
		`INSERT INTO counter_slots (key, slot, count)
SELECT 'post:' || ((g * 97) % $1::int + 1), s, ((g + s) % 21) - 10 FROM generate_series(1, 2000) AS g, generate_series(0, 3) AS s`,
		`INSERT INTO counter_slots (key, slot, count) SELECT 'new:' || g, 0, 5 FROM generate_series(1, 500) AS g WHERE $1::int > 0`,
		`CREATE TABLE posts (id integer PRIMARY KEY, title text NOT NULL)`,
		`INSERT INTO posts SELECT g, 'post ' || g FROM generate_series(1, $1::int) AS g`,
		`ANALYZE counters, counter_slots, posts`,
	} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, keys)
		}
		_, err := db.Pool.Exec(ctx, sql, args...)
		if err != nil {
			tb.Fatalf("seed: %v\n%s", err, sql)
		}
	}
}

// planNode is one node of EXPLAIN (FORMAT JSON) output.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	FunctionName string     `json:"Function Name"`
	Plans        []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// The read functions must stay index lookups however many keys there are:
// a plan is checked, not a timing, so the test is deterministic. Each
// query is checked as planned for its constants and as a generic plan for
// parameters (what a client's prepared statement gets after five runs).
func TestReadPlansAt200kKeys(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	seedPosts(t, db, 200_000)
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	const (
		perKey = iota // counter_totals(keys) and friends, and the view by key
		top           // counter_top
	)
	explain := func(sql string) planNode {
		t.Helper()
		var out []byte
		if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+sql).Scan(&out); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("EXPLAIN output %s: %v", out, err)
		}
		return plans[0].Plan
	}
	checkPlan := func(name string, kind int, plan planNode) {
		t.Helper()
		indexes := map[string]bool{}
		var problems []string
		plan.walk(func(n planNode) {
			indexes[n.IndexName] = true
			if n.NodeType == "Seq Scan" && (n.RelationName == "counters" || kind == perKey && n.RelationName == "counter_slots") {
				problems = append(problems, "sequential scan of "+n.RelationName)
			}
			if n.NodeType == "Function Scan" && n.FunctionName != "unnest" {
				problems = append(problems, "function "+n.FunctionName+" not inlined")
			}
		})
		switch kind {
		case perKey:
			if !indexes["counters_pkey"] && !indexes["counters_by_key_prefix"] {
				problems = append(problems, "no index lookup in counters")
			}
			if !indexes["counter_slots_pkey"] {
				problems = append(problems, "no index lookup in counter_slots")
			}
		case top:
			if !indexes["counters_by_total"] && !indexes["counters_by_key_prefix"] {
				problems = append(problems, "counters not read by counters_by_total or counters_by_key_prefix")
			}
		}
		if len(problems) > 0 {
			js, _ := json.MarshalIndent(plan, "", " ")
			t.Errorf("%s: %v; plan:\n%s", name, problems, js)
		}
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}

	for i, c := range []struct {
		name  string
		kind  int
		sql   string   // with $n parameters
		types string   // the parameters' types
		args  []string // SQL literals: for EXECUTE, and for $n in the literal form
	}{
		{"join through counter_totals(ARRAY[key])", perKey,
			`SELECT p.id, t.total FROM posts p CROSS JOIN LATERAL counter_totals(ARRAY['post:' || p.id]) AS t WHERE p.id BETWEEN $1 AND $2`,
			"int, int", []string{"1", "50"}},
		{"counter_totals(array)", perKey,
			`SELECT key, total FROM counter_totals($1)`,
			"text[]", []string{`ARRAY['post:1', 'post:97', 'new:1', 'never']`}},
		{"counter_estimates(array)", perKey,
			`SELECT * FROM counter_estimates($1)`,
			"text[]", []string{`ARRAY['post:1', 'post:97', 'new:1', 'never']`}},
		{"counter_totals view, key = ANY", perKey,
			`SELECT key, total FROM counter_totals WHERE key = ANY($1)`,
			"text[]", []string{`ARRAY['post:1', 'post:97', 'new:1', 'never']`}},
		{"counter_top(10)", top,
			`SELECT key, total FROM counter_top($1)`,
			"int", []string{"10"}},
		{"counter_top(10, prefix)", top,
			`SELECT key, total FROM counter_top($1, $2)`,
			"int, text", []string{"10", "'post:12'"}},
		{"counter_top(10, rare prefix)", top,
			`SELECT key, total FROM counter_top($1, $2)`,
			"int, text", []string{"10", "'post:1999'"}},
	} {
		literal := c.sql
		for j := len(c.args); j >= 1; j-- { // $10 before $1
			literal = strings.ReplaceAll(literal, "$"+strconv.Itoa(j), c.args[j-1])
		}
		exec(`RESET plan_cache_mode`)
		checkPlan(c.name, c.kind, explain(literal))

		stmt := fmt.Sprintf("q%d", i)
		exec(fmt.Sprintf("PREPARE %s(%s) AS %s", stmt, c.types, c.sql))
		exec(`SET plan_cache_mode = force_generic_plan`)
		checkPlan(c.name+", generic plan", c.kind, explain(fmt.Sprintf("EXECUTE %s(%s)", stmt, strings.Join(c.args, ", "))))
	}
	exec(`RESET plan_cache_mode`)
	exec(`DEALLOCATE ALL`)
}

// BenchmarkSQLReads compares, at 200,000 keys, the two reads docs/sql.md
// gives through the views with the same reads through the functions:
// 50 posts joined to their counts, and the top 10. It reports ms/op.
func BenchmarkSQLReads(b *testing.B) {
	db := pgtest.New(b, pgtest.Options{})
	seedPosts(b, db, 200_000)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		rows int
		sql  string
	}{
		{"join50/view", 50, `SELECT p.id, t.total FROM posts p JOIN counter_totals t ON t.key = 'post:' || p.id WHERE p.id BETWEEN 1 AND 50`},
		{"join50/function", 50, `SELECT p.id, t.total FROM posts p CROSS JOIN LATERAL counter_totals(ARRAY['post:' || p.id]) AS t WHERE p.id BETWEEN 1 AND 50`},
		{"top10/view", 10, `SELECT key, total FROM counter_totals ORDER BY total DESC LIMIT 10`},
		{"top10/function", 10, `SELECT key, total FROM counter_top(10)`},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				rows, err := db.Pool.Query(ctx, c.sql)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for rows.Next() {
					n++
				}
				if err := rows.Err(); err != nil {
					b.Fatal(err)
				}
				if n != c.rows {
					b.Fatalf("got %d rows; want %d", n, c.rows)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
			b.ReportMetric(0, "ns/op")
		})
	}
}
