package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"image"
	_ "image/png"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/proctest"
)

// counterdBinary is counterd, built once for this package's tests.
var counterdBinary string

func TestMain(m *testing.M) {
	// The run starts its own executable, this test binary, as the
	// peer's worker.
	if len(os.Args) > 1 && os.Args[1] == peerWorkerArg {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "peer-worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(proctest.Built(m, "counterd", "github.com/counterd/counterd/cmd/counterd", &counterdBinary))
}

// shortEnv is a run small enough for CI: every approach and section, two
// concurrencies, a small keyspace, 200 ms per cell, a one-second sustained
// load at a low rate.
func shortEnv(t *testing.T, db *pgtest.DB, out string) []string {
	return []string{
		"DATABASE_URL=" + pgtest.URL(t),
		"COUNTERBENCH_SCHEMA=" + db.Schema,
		"COUNTERBENCH_OUT=" + out,
		"COUNTERBENCH_COUNTERD=" + counterdBinary,
		"COUNTERBENCH_DURATION=200ms",
		"COUNTERBENCH_CLIENTS=1,4",
		"COUNTERBENCH_KEYSPACE=10000",
		"COUNTERBENCH_INGEST_REQUESTS=16000",
		"COUNTERBENCH_INGEST_RUNS=2",
		"COUNTERBENCH_LATENCY_RATES=2000,5000",
		"COUNTERBENCH_LATENCY_CLIENTS=10",
		"COUNTERBENCH_SUSTAIN_RATE=8000",
		"COUNTERBENCH_SUSTAIN_DURATION=1s",
		// TestBudgetShort runs the budget and tickets sections.
		"COUNTERBENCH_SECTIONS=matrix,ceiling,ingest,latency,sustain,windows",
	}
}

// children lists the processes whose parent is this test binary.
func children(t *testing.T) []string {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	var out []string
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(b)) {
			cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			out = append(out, pid+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// readCSV returns bench.csv's records as maps from column to value.
func readCSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]string
	for _, rec := range recs[1:] {
		m := map[string]string{}
		for i, col := range recs[0] {
			m[col] = rec[i]
		}
		rows = append(rows, m)
	}
	return rows
}

func num(t *testing.T, r map[string]string, col string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(r[col], 10, 64)
	if err != nil {
		t.Fatalf("%s %s c=%s: column %s = %q: %v", r["approach"], r["keys"], r["clients"], col, r[col], err)
	}
	return n
}

// TestRunShort runs every approach and section briefly and checks what
// the results claim: a row per cell, exact counterd totals, naive
// accounting that adds up against the table, a chart that decodes, and
// no process left behind. It never judges speed. It does not run in
// parallel because the leftover-process check sees every child of the
// test binary.
func TestRunShort(t *testing.T) {
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, nil, shortEnv(t, db, out), &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
	if !strings.Contains(stderr.String(), "[1/91] naive hot c=1") || !strings.Contains(stderr.String(), "[65/91] ingest counterd redis-benchmark -P 16 -n 16000 (run 1)") ||
		!strings.Contains(stderr.String(), "[73/91] ingest redis-worker redis-benchmark -P 16 -n 16000 (run 2)") ||
		!strings.Contains(stderr.String(), "[82/91] latency target redis-server-everysec 50000/s from 50 clients") ||
		!strings.Contains(stderr.String(), "[88/91] latency redis-server") ||
		!strings.Contains(stderr.String(), "[89/91] sustain counterd") || !strings.Contains(stderr.String(), "[91/91] windows counterd+3 windows zipf c=4") {
		t.Errorf("progress lines missing from stderr:\n%s", stderr.String())
	}

	rows := readCSV(t, filepath.Join(out, report.CSVFile))
	_, redisErr := exec.LookPath("redis-server")
	_, toolErr := exec.LookPath("redis-benchmark")
	cells := map[string]int{}
	var naiveStored int64
	for _, r := range rows {
		key := fmt.Sprintf("%s/%s/%s/%s", r["section"], r["approach"], r["keys"], r["clients"])
		cells[key]++
		name := r["section"] + " " + r["approach"] + " " + r["keys"] + " c=" + r["clients"]
		if r["missing"] == "true" {
			why := r["note"]
			switch {
			case strings.HasPrefix(r["approach"], "redis") && redisErr != nil && strings.Contains(why, "redis-server"):
			case r["section"] == report.Ingest && toolErr != nil && strings.Contains(why, "redis-benchmark"):
			default:
				t.Errorf("%s missing: %q", name, why)
			}
			continue
		}
		if num(t, r, "errors") != 0 || num(t, r, "increments") <= 0 {
			t.Errorf("%s: %s increments, %s errors (%s); want some and none", name, r["increments"], r["errors"], r["note"])
			continue
		}
		incr, stored := num(t, r, "increments"), num(t, r, "stored")
		switch {
		case r["approach"] == "naive":
			// What is stored plus what was lost is what was attempted.
			if lost := -num(t, r, "diff"); lost < 0 || stored+lost != incr {
				t.Errorf("%s: stored %d + lost %d != attempted %d", name, stored, lost, incr)
			}
			naiveStored += stored
		case r["approach"] == "probabilistic":
			if rows := num(t, r, "rows_written"); stored != rows*100 || r["estimate_bound95"] == "" {
				t.Errorf("%s: stored %d from %d writes of 100, bound %q", name, stored, rows, r["estimate_bound95"])
			}
		default:
			if r["exact"] != "true" || stored != incr {
				t.Errorf("%s: stored %d; want exactly the %d increments acknowledged", name, stored, incr)
			}
		}
		if strings.HasPrefix(r["approach"], "counterd") || r["approach"] == report.Peer {
			// Coalescing never writes more rows than increments make
			// changes: one, or four with three windows.
			most := incr
			if strings.Contains(r["approach"], "windows") {
				most = 4 * incr
			}
			if rw := num(t, r, "rows_written"); rw < 1 || rw > most {
				t.Errorf("%s: %d slot rows for %d increments; want 1..%d", name, rw, incr, most)
			}
			if r["drain_seconds"] == "" || r["committed_rate"] == "" {
				t.Errorf("%s: drain %q, committed rate %q; want both", name, r["drain_seconds"], r["committed_rate"])
			}
		} else if r["drain_seconds"] != "" || r["committed_rate"] != "" {
			t.Errorf("%s: drain %q, committed rate %q; want neither", name, r["drain_seconds"], r["committed_rate"])
		}
		if r["section"] == report.Ingest || r["section"] == report.Latency {
			// CPU per increment is read for every server; PostgreSQL's
			// for counterd and the peer, whose backends are on this
			// machine, and the worker's for the peer.
			wantPG := r["approach"] == report.Counterd || r["approach"] == report.Peer
			wantWorker := r["approach"] == report.Peer
			if r["server_cpu_us_per_incr"] == "" || (r["pg_cpu_us_per_incr"] != "") != wantPG || (r["pg_server_cpu_us_per_incr"] != "") != wantPG ||
				(r["worker_cpu_us_per_incr"] != "") != wantWorker {
				t.Errorf("%s: cpu µs/incr server %q, worker %q, PostgreSQL %q, whole PostgreSQL %q; want the server's, PostgreSQL's only for counterd and the peer, the worker's only for the peer",
					name, r["server_cpu_us_per_incr"], r["worker_cpu_us_per_incr"], r["pg_cpu_us_per_incr"], r["pg_server_cpu_us_per_incr"])
			}
		}
		if r["section"] == report.Ingest && r["client_cpu_us_per_incr"] == "" {
			t.Errorf("%s: no CPU µs/incr for redis-benchmark, the load generator", name)
		}
		if r["section"] == report.Ingest && r["run"] != "1" && r["run"] != "2" {
			t.Errorf("%s: run %q; want 1 or 2", name, r["run"])
		}
		if r["section"] == report.Sustain {
			// Whatever was stored went through at least one round.
			if num(t, r, "rounds") < 1 || r["write_rows_per_s"] == "" || r["pending_max_second_half"] == "" ||
				(r["keeps_up"] != "true" && r["keeps_up"] != "false") {
				t.Errorf("%s: rounds %s, write rows/s %q, pending max %q, keeps up %q; want a round, a write speed and a verdict",
					name, r["rounds"], r["write_rows_per_s"], r["pending_max_second_half"], r["keeps_up"])
			}
		}
	}

	want := map[string]int{}
	for _, a := range approaches {
		for _, k := range []string{"hot", "zipf", "uniform"} {
			for _, c := range []string{"1", "4"} {
				want[fmt.Sprintf("matrix/%s/%s/%s", a.name, k, c)] = 1
			}
		}
	}
	for _, k := range []string{"zipf", "uniform"} {
		for _, c := range []string{"1", "2"} {
			want[fmt.Sprintf("ceiling/ceiling/%s/%s", k, c)] = 1
		}
	}
	for _, s := range []string{"counterd", "redis-server", "redis-server-everysec", "redis-worker"} {
		want["ingest/"+s+"/random of 100000/50"] = 4 // two runs of -P 16 and -P 1
	}
	for _, s := range []string{"counterd", "redis-server", "redis-server-everysec"} {
		want["latency/"+s+"/uniform/10"] = 2 // one per offered rate
	}
	// The latency target's cells, which the latency section's rates miss.
	want["latency/counterd/uniform/50"] = 1
	want["latency/redis-server-everysec/uniform/50"] = 1
	want["sustain/counterd/zipf/50"] = 1
	want["windows/counterd/zipf/4"] = 1
	want["windows/counterd+3 windows/zipf/4"] = 1
	for k, n := range want {
		if cells[k] != n {
			t.Errorf("cell %s: %d rows; want %d", k, cells[k], n)
		}
	}
	if len(rows) != 60+4+16+2+6+1+2 {
		t.Errorf("%d rows; want 91", len(rows))
	}

	var inTable int64
	if err := db.Pool.QueryRow(ctx, `SELECT sum(n)::bigint FROM pattern_naive`).Scan(&inTable); err != nil {
		t.Fatal(err)
	}
	if inTable != naiveStored {
		t.Errorf("pattern_naive holds %d; the naive rows claim %d stored", inTable, naiveStored)
	}

	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Reproduce with", "make bench", "logs: counterd.log, redis-server.log", "| PostgreSQL | ", "## Ceiling", "## Ingest", "## Latency", "skiplocked",
		"| pipeline | counterd ÷ redis everysec | target |", "| redis-server (appendfsync everysec) | 16 | 2 |", "Target p99 < 1 ms at 50,000/s from 50 unpipelined clients: counterd p99",
		"## Sustained load", "counterd, hot: committed increments per second", "| counterd-p16 ÷ atomic |"} {
		if !bytes.Contains(md, []byte(s)) {
			t.Errorf("bench.md lacks %q", s)
		}
	}
	// The pattern's ratios need both sides measured.
	if s := "| pipeline | committed: counterd ÷ pattern | target |"; redisErr == nil && toolErr == nil && !bytes.Contains(md, []byte(s)) {
		t.Errorf("bench.md lacks %q", s)
	}
	// The servers' logs hold everything they printed, ready lines included.
	logs := map[string]string{report.CounterdLogFile: "counterd ready"}
	if redisErr == nil {
		logs[report.RedisLogFile] = "ready to accept connections"
		logs[report.RedisAOFLogFile] = "ready to accept connections"
		if toolErr == nil {
			logs[report.PeerWorkerLogFile] = "peer worker stopped"
		}
	}
	for name, want := range logs {
		log, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if !strings.Contains(strings.ToLower(string(log)), want) {
			t.Errorf("%s lacks %q:\n%s", name, want, log)
		}
	}
	for _, name := range []string{report.ChartFile, report.SustainChartFile} {
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		_, format, err := image.Decode(f)
		f.Close()
		if err != nil || format != "png" {
			t.Errorf("%s: %v, format %q; want a PNG", name, err, format)
		}
	}
	f, err := os.Open(filepath.Join(out, report.SustainCSVFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, err := csv.NewReader(f).ReadAll()
	if err != nil || len(samples) < 2 {
		t.Fatalf("sustain.csv: %v, %d records; want a header and at least one sample", err, len(samples))
	}
	// Every latency cell is recorded second by second.
	raw, err := os.ReadFile(filepath.Join(out, report.LatencySecondsFile))
	if err != nil {
		t.Fatal(err)
	}
	seconds, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	if err != nil || len(seconds) < 2 || strings.Join(seconds[0], ",") != strings.Join(report.SecondsColumns, ",") {
		t.Fatalf("%s: %v, %d records; want its header and a record per second:\n%s", report.LatencySecondsFile, err, len(seconds), raw)
	}
}

// TestMissingRedis points the run at redis tools that do not exist: the
// rows that need them say why they are missing, and the run succeeds. Not
// parallel: it starts counterd, which TestRunShort's check would see.
func TestMissingRedis(t *testing.T) {
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
	out := t.TempDir()
	env := append(shortEnv(t, db, out),
		"COUNTERBENCH_REDIS_SERVER=/nonexistent/redis-server", "COUNTERBENCH_REDIS_BENCHMARK=/nonexistent/redis-benchmark",
		"COUNTERBENCH_APPROACHES=redis-p16", "COUNTERBENCH_KEYS=hot", "COUNTERBENCH_CLIENTS=1",
		"COUNTERBENCH_SECTIONS=matrix,ingest,latency", "COUNTERBENCH_DURATION=100ms")
	var stderr bytes.Buffer
	if err := run(context.Background(), nil, env, &bytes.Buffer{}, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	rows := readCSV(t, filepath.Join(out, report.CSVFile))
	// matrix, ingest (four servers, two depths, two runs), latency at
	// two rates on three servers, the latency target on counterd and
	// redis-server.
	if len(rows) != 1+16+2*3+2 {
		t.Fatalf("%d rows; want 25", len(rows))
	}
	for _, r := range rows {
		name := r["section"] + " " + r["approach"]
		var want string
		switch {
		case r["section"] == report.Ingest:
			want = "redis-benchmark not found"
		case r["approach"] != "counterd":
			want = "redis-server not found"
		}
		if want == "" {
			if r["missing"] != "false" || r["exact"] != "true" {
				t.Errorf("%s: missing %s exact %s (%s); want measured and exact", name, r["missing"], r["exact"], r["note"])
			}
			continue
		}
		if r["missing"] != "true" || !strings.Contains(r["note"], want) {
			t.Errorf("%s: missing %s, note %q; want missing saying %q", name, r["missing"], r["note"], want)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(md, []byte("| Redis | not installed: /nonexistent/redis-server not found")) {
		t.Errorf("bench.md does not say redis-server is missing:\n%s", md)
	}
}

// TestCancelStopsEverything interrupts a run once the load of its first
// cell, on counterd or on redis-server, is under way: run returns promptly
// and leaves no process behind. Not parallel, for the same reason as
// TestRunShort, and because it sets testHookDraw.
func TestCancelStopsEverything(t *testing.T) {
	for _, approach := range []string{"counterd-p1", "redis-p1"} {
		t.Run(approach, func(t *testing.T) {
			if _, err := exec.LookPath("redis-server"); err != nil && approach == "redis-p1" {
				t.Skip("redis-server is not installed")
			}
			db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
			env := append(shortEnv(t, db, t.TempDir()),
				"COUNTERBENCH_DURATION=10s", "COUNTERBENCH_APPROACHES="+approach, "COUNTERBENCH_SECTIONS=matrix")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var (
				once      sync.Once
				cancelled time.Time
			)
			testHookDraw = func() { once.Do(func() { cancelled = time.Now(); cancel() }) }
			defer func() { testHookDraw = nil }()
			var stderr bytes.Buffer
			err := run(ctx, nil, env, &bytes.Buffer{}, &stderr)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("run: %v; want context.Canceled\n%s", err, stderr.String())
			}
			if took := time.Since(cancelled); took > 9*time.Second {
				t.Errorf("run took %v after a cancel during a 10s cell; want it to stop early", took)
			}
			if left := children(t); len(left) > 0 {
				t.Errorf("processes left running: %v", left)
			}
		})
	}
}

func TestHelpAndBadSettings(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, nil, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"COUNTERBENCH_DURATION", "COUNTERBENCH_CLIENTS", "1,8,32,64", "COUNTERBENCH_REDIS_BENCHMARK", "DATABASE_URL", "uniques", "COUNTERBENCH_ONCE_REPEATS"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("help lacks %q", v)
		}
	}
	f := func(wantVar string, env ...string) {
		t.Helper()
		err := run(context.Background(), nil, append([]string{"DATABASE_URL=postgres://nowhere/x"}, env...), &out, &out)
		var u usageError
		var cerr *config.Error
		if !errors.As(err, &u) || !errors.As(err, &cerr) || cerr.Var != wantVar {
			t.Errorf("env %v: %v; want a usage error naming %s", env, err, wantVar)
		}
	}
	f("COUNTERBENCH_DURATION", "COUNTERBENCH_DURATION=0s")
	f("COUNTERBENCH_CLIENTS", "COUNTERBENCH_CLIENTS=1,0")
	f("COUNTERBENCH_CLIENTS", "COUNTERBENCH_CLIENTS=many")
	f("COUNTERBENCH_KEYS", "COUNTERBENCH_KEYS=hot,normal")
	f("COUNTERBENCH_APPROACHES", "COUNTERBENCH_APPROACHES=naive,magic")
	f("COUNTERBENCH_SECTIONS", "COUNTERBENCH_SECTIONS=matrix,vibes")
	f("COUNTERBENCH_SCHEMA", "COUNTERBENCH_SCHEMA=public")
	f("COUNTERBENCH_SCHEMA", "COUNTERBENCH_SCHEMA=Robert'); DROP TABLE x")
	f("COUNTERBENCH_INGEST_REQUESTS", "COUNTERBENCH_INGEST_REQUESTS=1000")
	f("COUNTERBENCH_INGEST_RUNS", "COUNTERBENCH_INGEST_RUNS=0")
	f("COUNTERBENCH_KEYSPACE", "COUNTERBENCH_KEYSPACE=0")
	f("COUNTERBENCH_SUSTAIN_RATE", "COUNTERBENCH_SUSTAIN_RATE=0")
	f("COUNTERBENCH_SUSTAIN_DURATION", "COUNTERBENCH_SUSTAIN_DURATION=-1s")
	f("COUNTERBENCH_BUDGETS", "COUNTERBENCH_BUDGETS=100,0")
	f("COUNTERBENCH_BUDGET_CLIENTS", "COUNTERBENCH_BUDGET_CLIENTS=3,600")
	f("COUNTERBENCH_TICKET_CLIENTS", "COUNTERBENCH_TICKET_CLIENTS=0")
	f("COUNTERBENCH_BUDGET_APPROACHES", "COUNTERBENCH_BUDGET_APPROACHES=lock-free,hope")
	f("COUNTERBENCH_BUDGET_DURATION", "COUNTERBENCH_BUDGET_DURATION=0s")
	f("COUNTERBENCH_TICKETS", "COUNTERBENCH_TICKETS=0")
	f("COUNTERBENCH_UNIQUES_REQUESTS", "COUNTERBENCH_UNIQUES_REQUESTS=1000")
	f("COUNTERBENCH_ONCE_REQUESTS", "COUNTERBENCH_ONCE_REQUESTS=0")
	f("COUNTERBENCH_UNIQUES_KEYS", "COUNTERBENCH_UNIQUES_KEYS=0")
	f("COUNTERBENCH_UNIQUES_RUNS", "COUNTERBENCH_UNIQUES_RUNS=0")
	f("COUNTERBENCH_ONCE_REPEATS", "COUNTERBENCH_ONCE_REPEATS=1,100")
	f("COUNTERBENCH_ONCE_REPEATS", "COUNTERBENCH_ONCE_REPEATS=0")
	f("COUNTERBENCH_PARTITIONS", "COUNTERBENCH_PARTITIONS=1,3")
	f("COUNTERBENCH_PARTITIONS", "COUNTERBENCH_PARTITIONS=0")
	f("COUNTERBENCH_PARTITIONS", "COUNTERBENCH_PARTITIONS=512")
	f("COUNTERBENCH_PARTITIONS_REQUESTS", "COUNTERBENCH_PARTITIONS_REQUESTS=1000")
	f("COUNTERBENCH_PARTITIONS_RUNS", "COUNTERBENCH_PARTITIONS_RUNS=0")
	f("COUNTERBENCH_SCHEMA", "COUNTERBENCH_SCHEMA="+strings.Repeat("s", 50), "COUNTERBENCH_SECTIONS=partitions")
	f("COUNTERBENCH_FLEET_SIZES", "COUNTERBENCH_FLEET_SIZES=0,4")
	f("COUNTERBENCH_FLEET_SIZES", "COUNTERBENCH_FLEET_SIZES=65")
	f("COUNTERBENCH_FLEET_REQUESTS", "COUNTERBENCH_FLEET_REQUESTS=1000")
	f("COUNTERBENCH_FLEET_REQUESTS", "COUNTERBENCH_FLEET_REQUESTS=256") // 16 for each of 32 daemons is 512
	f("COUNTERBENCH_FLEET_KEYS", "COUNTERBENCH_FLEET_KEYS=0")
	f("COUNTERBENCH_FLEET_SETTLE", "COUNTERBENCH_FLEET_SETTLE=-1s")
	f("DATABASE_URL", "DATABASE_URL=")
	if err := run(context.Background(), []string{"extra"}, nil, &out, &out); !errors.As(err, new(usageError)) {
		t.Errorf("extra argument: %v; want a usage error", err)
	}
}
