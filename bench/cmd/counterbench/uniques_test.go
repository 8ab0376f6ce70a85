package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/pgtest"
)

func TestRepeatShare(t *testing.T) {
	t.Parallel()
	f := func(n, k int, want float64) {
		t.Helper()
		if got := repeatShare(n, k); math.Abs(got-want) > 1e-4 {
			t.Errorf("repeatShare(%d, %d) = %.6f; want %.6f", n, k, got, want)
		}
	}
	f(10, 1, 0.9)                 // one pair: every request after the first repeats
	f(0, 10, 0)                   // nothing drawn
	f(1, 1000, 0)                 // one request never repeats
	f(1_000_000, 7053, 0.0099)    // measured: 990,013 of 1,000,000 counted
	f(1_000_000, 792, 0.5001)     // measured: 500,014 counted
	f(2_000_000, 1000, 1-0.43233) // k²(1−e^(−2)) distinct of 2,000,000
}

func TestOnceKeys(t *testing.T) {
	t.Parallel()
	f := func(n int, repeat float64, want int) {
		t.Helper()
		k := onceKeys(n, repeat)
		if k != want {
			t.Errorf("onceKeys(%d, %g) = %d; want %d", n, repeat, k, want)
		}
		// No other k comes closer to the share asked for.
		for _, other := range []int{k - 1, k + 1} {
			if other >= 1 && math.Abs(repeatShare(n, other)-repeat) < math.Abs(repeatShare(n, k)-repeat) {
				t.Errorf("onceKeys(%d, %g) = %d, but %d comes closer", n, repeat, k, other)
			}
		}
	}
	f(500_000, 0.01, 4983)
	f(500_000, 0.5, 560)
	f(1_000_000, 0.01, 7047)
	f(16, 0.99, 1) // more repeats than 16 requests can make: one key, one visitor
}

// TestUniquesShort runs the uniques section briefly, twice over, and
// checks what its rows claim: INCR exact, PFADD's sketches hold members
// and were written as sketch rows, INCRONCE counted exactly its seen-set
// rows, redis-server's rows present or saying why not, the ratios and
// targets in bench.md, and no process left behind. It never judges speed.
// Not parallel: it starts processes, which TestRunShort's leftover check
// would see.
func TestUniquesShort(t *testing.T) {
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
	out := t.TempDir()
	env := append(shortEnv(t, db, out),
		"COUNTERBENCH_SECTIONS=uniques",
		"COUNTERBENCH_UNIQUES_REQUESTS=16000",
		"COUNTERBENCH_UNIQUES_KEYS=100",
		"COUNTERBENCH_ONCE_REQUESTS=8000",
		"COUNTERBENCH_ONCE_REPEATS=1,50",
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
	if !strings.Contains(stderr.String(), "[1/12] uniques INCR counterd -n 16000 -r 100 (run 1)") ||
		!strings.Contains(stderr.String(), "[12/12] uniques INCR counterd -n 16000 -r 100 (run 2)") {
		t.Errorf("progress lines missing from stderr:\n%s", stderr.String())
	}
	rows := readCSV(t, filepath.Join(out, report.CSVFile))
	if len(rows) != 12 {
		t.Fatalf("%d rows; want 12", len(rows))
	}
	_, redisErr := exec.LookPath("redis-server")
	_, toolErr := exec.LookPath("redis-benchmark")
	for _, r := range rows {
		name := r["command"] + " " + r["approach"] + " run " + r["run"]
		if r["missing"] == "true" {
			if !(toolErr != nil && strings.Contains(r["note"], "redis-benchmark")) &&
				!(redisErr != nil && r["approach"] != report.Counterd && strings.Contains(r["note"], "redis-server")) {
				t.Errorf("%s missing: %q", name, r["note"])
			}
			continue
		}
		incr := num(t, r, "increments")
		if incr != 16000 && incr != 8000 {
			t.Errorf("%s: %d requests; want -n", name, incr)
		}
		switch {
		case r["command"] == report.CommandIncr:
			if r["exact"] != "true" || num(t, r, "rows_written") < 1 || r["rows_per_round"] == "" {
				t.Errorf("%s: exact %s, %s slot rows, %q per round; want exact, some, a figure", name, r["exact"], r["rows_written"], r["rows_per_round"])
			}
		case r["command"] == report.CommandPFAdd && r["approach"] == report.Counterd:
			// At most 100 keys × 100 members; some members repeat.
			if n := num(t, r, "new"); n < 1 || n > 100*100 || n >= incr {
				t.Errorf("%s: %d distinct members for %d PFADDs of 100 keys × 100 members", name, n, incr)
			}
			// A round writes at most one sketch row a key.
			if rw, rounds := num(t, r, "rows_written"), num(t, r, "rounds"); rw < 1 || rounds < 1 || rw > 100*rounds {
				t.Errorf("%s: %d sketch rows in %d rounds; want 1..100 a round", name, rw, rounds)
			}
			if r["wal_bytes_per_incr"] == "" || r["pg_cpu_us_per_incr"] == "" {
				t.Errorf("%s: WAL %q, PostgreSQL CPU %q per PFADD; want both", name, r["wal_bytes_per_incr"], r["pg_cpu_us_per_incr"])
			}
		case r["command"] == report.CommandPFAdd:
			if num(t, r, "new") < 1 || r["server_cpu_us_per_incr"] == "" {
				t.Errorf("%s: PFCOUNTs %s, CPU %q; want members and CPU", name, r["new"], r["server_cpu_us_per_incr"])
			}
		default: // INCRONCE
			if n, seen := num(t, r, "new"), num(t, r, "seen_rows"); n < 1 || n > incr || n != seen {
				t.Errorf("%s: counted %d of %d with %d seen rows; want the seen rows counted, once each", name, n, incr, seen)
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## Unique counts", "| PFADD counterd ÷ INCR counterd | ", "| INCRONCE, 50% repeats counterd ÷ INCR counterd | ", "Per counterd `PFADD` (median over runs)"} {
		if !bytes.Contains(md, []byte(s)) {
			t.Errorf("bench.md lacks %q", s)
		}
	}
	// Every counterd cell is a redis-benchmark load: without the tool no
	// counterd starts.
	log, err := os.ReadFile(filepath.Join(out, report.UniquesLogFile))
	if toolErr == nil && (err != nil || !bytes.Contains(log, []byte("counterd ready"))) {
		t.Errorf("%s: %v; want counterd's ready line", report.UniquesLogFile, err)
	}
}
