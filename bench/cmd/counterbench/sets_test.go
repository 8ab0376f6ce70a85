package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/pgtest"
)

func TestSetsUserAndPost(t *testing.T) {
	t.Parallel()
	b := &bench{cfg: settings{SetsPosts: 10}}
	// Every user id once across 4 clients × 5 sends, each post 2 of them.
	seen := map[int64]bool{}
	posts := make([]int, 10)
	for c := range 4 {
		for i := range 5 {
			u := setsUser(c, i, 4)
			if seen[u] {
				t.Fatalf("user %d sent twice", u)
			}
			seen[u] = true
			posts[b.setsPost(u)]++
		}
	}
	for p, n := range posts {
		if n != 2 {
			t.Errorf("post %d liked %d times; want 2", p, n)
		}
	}
	// Repeats resend a client's own members in order, round and round.
	st := &setsGroupState{}
	b.recordSent(st, []int{3, 0, 1})
	if got := st.user(report.CommandSAddRepeat, 0, 4, 3); got != setsUser(0, 1, 3) {
		t.Errorf("client 0's 5th repeat is user %d; want %d", got, setsUser(0, 1, 3))
	}
	if st.limit(report.CommandSAddRepeat, 1) != 0 || st.limit(report.CommandSAddNew, 1) == 0 {
		t.Errorf("limits: a client with nothing to repeat sends nothing, new members are not limited")
	}
	if sum(st.want) != 4 {
		t.Errorf("want sums to %d; want the 4 members sent", sum(st.want))
	}
}

// TestSetsShort runs the sets section briefly with few clients and
// posts and checks its structure and counts: every cell a row, every row
// exact (the section itself failed any cell whose SCARDs, like_counts
// or likes rows differed from the distinct members sent), replies all new
// then all repeats, repeats leaving the members as they were, the ratios
// and targets in bench.md, and no process left behind. It never judges
// speed. Not parallel: it starts processes, which TestRunShort's leftover
// check would see.
func TestSetsShort(t *testing.T) {
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
	out := t.TempDir()
	env := append(shortEnv(t, db, out),
		"COUNTERBENCH_SECTIONS=sets",
		"COUNTERBENCH_SETS_POSTS=7",
		"COUNTERBENCH_SETS_CLIENTS=3",
		"COUNTERBENCH_SETS_RUNS=2",
		// A cap, so some cells end on it rather than on the clock.
		"COUNTERBENCH_SETS_REQUESTS=3000",
	)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, nil, env, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
	cells := setsCellCount()
	if !strings.Contains(stderr.String(), fmt.Sprintf("[1/%d] sets INCR counterd -P 16 (run 1)", 2*cells)) ||
		!strings.Contains(stderr.String(), fmt.Sprintf("[%d/%d] sets INCR counterd -P 16 (run 2)", 2*cells, 2*cells)) ||
		!strings.Contains(stderr.String(), "sets SADD, repeats app-likes -P 1 (run 2)") {
		t.Errorf("progress lines missing from stderr:\n%s", stderr.String())
	}
	rows := readCSV(t, filepath.Join(out, report.CSVFile))
	if len(rows) != 2*cells {
		t.Fatalf("%d rows; want %d", len(rows), 2*cells)
	}
	_, redisErr := exec.LookPath("redis-server")
	// The new members' row of each group, by server, depth and run.
	added := map[string]int64{}
	for _, r := range rows {
		name := r["command"] + " " + r["approach"] + " -P " + r["pipeline"] + " run " + r["run"]
		group := r["approach"] + " " + r["pipeline"] + " " + r["run"]
		if r["missing"] == "true" {
			if redisErr == nil || r["approach"] != report.RedisEverysec {
				t.Errorf("%s missing: %q", name, r["note"])
			}
			continue
		}
		n := num(t, r, "increments")
		if n < 1 || n > 3000 || r["clients"] != "3" || r["section"] != report.Sets {
			t.Errorf("%s: %d requests from %s clients; want 1..3000 from 3", name, n, r["clients"])
		}
		if r["committed_rate"] == "" || (r["exact"] != "true" && r["command"] == report.CommandIncr) {
			t.Errorf("%s: committed %q, exact %q", name, r["committed_rate"], r["exact"])
		}
		switch r["command"] {
		case report.CommandIncr:
			if r["approach"] != report.Counterd || num(t, r, "stored") != n {
				t.Errorf("%s: stored %s of %d increments", name, r["stored"], n)
			}
		case report.CommandSAddNew:
			// Every member new: every reply 1, the total and the
			// members grown by each.
			if num(t, r, "new") != n || num(t, r, "stored") != n || num(t, r, "members") != n {
				t.Errorf("%s: %d SADDs of new members, %s replied new, stored %s, members %s; want all equal", name, n, r["new"], r["stored"], r["members"])
			}
			added[group] = n
		case report.CommandSAddRepeat:
			m, ok := added[group]
			if !ok {
				t.Fatalf("%s: no new members' row before it", name)
			}
			if num(t, r, "new") != 0 || num(t, r, "stored") != 0 || num(t, r, "members") != m {
				t.Errorf("%s: %s replied new, stored %s, members %s; want 0, 0 and the %d added before", name, r["new"], r["stored"], r["members"], m)
			}
		default:
			t.Errorf("%s: unknown command", name)
		}
		if r["approach"] != report.RedisEverysec && r["pg_cpu_us_per_incr"] == "" {
			t.Errorf("%s: no PostgreSQL CPU per request", name)
		}
		if r["approach"] == report.Counterd && num(t, r, "rounds") < 1 {
			t.Errorf("%s: no committed round counted", name)
		}
		if r["approach"] == report.AppLikes && r["pipeline"] != "1" {
			t.Errorf("%s: the app pattern pipelined", name)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"## Exact sets (SADD)",
		"| SADD, new members counterd -P 1 ÷ INCR counterd -P 1 | ",
		"| SADD, new members counterd -P 16 ÷ SADD, new members app pattern (likes + like_count) | ",
		"| SADD, repeats counterd -P 1 ÷ SADD, repeats redis-server (appendfsync everysec) -P 1 | ",
		"PostgreSQL CPU per request, µs",
	} {
		if !bytes.Contains(md, []byte(s)) {
			t.Errorf("bench.md lacks %q", s)
		}
	}
	if bytes.Contains(md, []byte("| SADD, new members counterd -P 1 ÷ INCR counterd -P 1 | — |")) {
		t.Errorf("bench.md has no ratio for SADD against INCR")
	}
}
