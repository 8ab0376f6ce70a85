package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/pgtest"
)

// TestPeerShort runs the ingest section once with small loads and checks
// the Redis-buffer-plus-worker pattern's cells: every HINCRBY is in
// PostgreSQL after the drain, with a drain time, a committed rate, rows
// the worker wrote, and CPU read for redis-server, the worker process and
// the worker's backend; bench.md sets it against counterd. It never
// judges speed. Not parallel: it starts processes, which TestRunShort's
// check would see.
func TestPeerShort(t *testing.T) {
	for _, tool := range []string{"redis-server", "redis-benchmark"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " is not installed")
		}
	}
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
	out := t.TempDir()
	env := append(shortEnv(t, db, out), "COUNTERBENCH_SECTIONS=ingest,latency", "COUNTERBENCH_INGEST_RUNS=1",
		"COUNTERBENCH_LATENCY_RATES=50000", "COUNTERBENCH_LATENCY_CLIENTS=50", "COUNTERBENCH_DURATION=100ms")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	if err := run(ctx, nil, env, &bytes.Buffer{}, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
	peers := 0
	for _, r := range readCSV(t, filepath.Join(out, report.CSVFile)) {
		if r["approach"] != report.Peer {
			continue
		}
		peers++
		name := "peer -P " + r["pipeline"]
		if r["missing"] != "false" || r["exact"] != "true" || num(t, r, "stored") != 16000 {
			t.Errorf("%s: missing %s, exact %s, stored %s (%s); want all 16000 HINCRBYs stored", name, r["missing"], r["exact"], r["stored"], r["note"])
			continue
		}
		for _, c := range []string{"drain_seconds", "committed_rate", "server_cpu_us_per_incr", "worker_cpu_us_per_incr", "pg_cpu_us_per_incr"} {
			if r[c] == "" {
				t.Errorf("%s: no %s", name, c)
			}
		}
		// One row per key a move carried: at least one, at most one per
		// increment.
		if rw := num(t, r, "rows_written"); rw < 1 || rw > 16000 {
			t.Errorf("%s: %d rows written; want 1..16000", name, rw)
		}
	}
	if peers != 2 {
		t.Errorf("%d peer rows; want 2 (-P 16 and -P 1)", peers)
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| pipeline | committed: counterd ÷ pattern | target |", "| redis-server everysec + worker → PostgreSQL | 16 | 1 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("bench.md lacks %q", want)
		}
	}
	log, err := os.ReadFile(filepath.Join(out, report.PeerWorkerLogFile))
	if err != nil || strings.Count(string(log), "peer worker stopped") != 2 {
		t.Errorf("%s (%v) should say twice that a worker stopped:\n%s", report.PeerWorkerLogFile, err, log)
	}
}
