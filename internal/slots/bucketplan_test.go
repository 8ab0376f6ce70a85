package slots_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/pgtest"
)

// The bucket reads must stay index range scans however many bucket rows
// there are: at 1,000,000 keys, each with an hour bucket somewhere in the
// last 14 days (and a few slot rows), "sum since" reads one key's range of
// the primary key and trending reads the last 24 hours of
// counter_bucket_rows_by_time, both with constants and as generic plans
// for parameters. (A bitmap scan of the intended index counts: it is the
// same range read.)
func TestBucketPlansAt1MRows(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
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
	const now = `'2026-03-01T10:00:00Z'::timestamptz`
	exec(`INSERT INTO counter_bucket_rows (key, width, bucket_start, total, keep_until)
SELECT 'post:' || g, 3, ` + now + ` - (g % 336) * interval '1 hour', g % 1000, ` + now + ` + interval '14 days'
FROM generate_series(0, 999999) AS g`)
	exec(`INSERT INTO counter_bucket_slots (key, width, bucket_start, slot, count, keep_until)
SELECT 'post:' || g, 3, ` + now + `, 0, 1, ` + now + ` + interval '14 days' FROM generate_series(1, 500) AS g`)
	exec(`VACUUM ANALYZE counter_bucket_rows`)
	exec(`ANALYZE counter_bucket_slots`)

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
	check := func(name, index string, plan planNode) {
		t.Helper()
		var problems []string
		used := false
		plan.walk(func(n planNode) {
			if n.RelationName == "counter_bucket_rows" || n.IndexName != "" {
				if n.NodeType == "Seq Scan" {
					problems = append(problems, n.NodeType+" of "+n.RelationName)
				}
				if n.IndexName == index && (n.NodeType == "Index Scan" || n.NodeType == "Index Only Scan" || n.NodeType == "Bitmap Index Scan") {
					used = true
				}
			}
			if n.NodeType == "Function Scan" && n.FunctionName != "unnest" {
				problems = append(problems, "function "+n.FunctionName+" not inlined")
			}
		})
		if !used {
			problems = append(problems, "no index scan of "+index)
		}
		if len(problems) > 0 {
			js, _ := json.MarshalIndent(plan, "", " ")
			t.Errorf("%s: %v; plan:\n%s", name, problems, js)
		}
	}
	// generic says whether the generic plan must be an index scan too.
	// Trending's is not asked to be: with since unknown PostgreSQL
	// assumes a third of the rows match, and when other transactions
	// keep VACUUM from marking the heap all-visible (parallel tests do)
	// a sequential scan is then the cheaper guess. The daemon's TOP sends
	// values, so PostgreSQL plans it with them (a custom plan costs far
	// less than that generic one, so the plan cache keeps custom plans).
	for i, c := range []struct {
		name, index, sql, types string
		args                    []string
		generic                 bool
	}{
		{"counter_sum_since", "counter_bucket_rows_pkey",
			`SELECT * FROM counter_sum_since($1, $2, $3)`,
			"text, text, timestamptz", []string{"'post:42'", "'hour'", now + ` - interval '23 hours'`}, true},
		{"counter_trending", "counter_bucket_rows_by_time",
			`SELECT * FROM counter_trending($1, $2, $3, $4)`,
			"text, text, timestamptz, int", []string{"'post:'", "'hour'", now + ` - interval '23 hours'`, "10"}, false},
		{"counter_buckets view by key", "counter_bucket_rows_pkey",
			`SELECT * FROM counter_buckets WHERE key = $1 AND bucket_start >= $2`,
			"text, timestamptz", []string{"'post:42'", now + ` - interval '23 hours'`}, true},
	} {
		literal := c.sql
		for j := len(c.args); j >= 1; j-- {
			literal = strings.ReplaceAll(literal, fmt.Sprintf("$%d", j), c.args[j-1])
		}
		exec(`RESET plan_cache_mode`)
		check(c.name, c.index, explain(literal))
		if !c.generic {
			continue
		}
		stmt := fmt.Sprintf("b%d", i)
		exec(fmt.Sprintf("PREPARE %s(%s) AS %s", stmt, c.types, c.sql))
		exec(`SET plan_cache_mode = force_generic_plan`)
		check(c.name+", generic plan", c.index, explain(fmt.Sprintf("EXECUTE %s(%s)", stmt, strings.Join(c.args, ", "))))
	}
	exec(`RESET plan_cache_mode`)
	exec(`DEALLOCATE ALL`)
}
