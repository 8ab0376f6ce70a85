package main

import (
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// BenchmarkUniques measures PFADD per second against INCR in the same run
// and against redis-server's PFADD, with redis-benchmark (50 clients, 16
// commands per round trip, 1,000 keys, random members):
//
//	make gobench BENCH=Uniques
//
// Each rate is a custom metric; b.N is the requests of each run.
func BenchmarkUniques(b *testing.B) {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		b.Skip("redis-benchmark is not installed")
	}
	db := pgtest.New(b, pgtest.Options{})
	d := startDaemon(b, db)
	n := max(b.N, 20000)
	incr := benchRate(b, d.socket, n, "INCR", "c:__rand_int__")
	pfadd := benchRate(b, d.socket, n, "PFADD", "u:__rand_int__", "m__rand_int__")
	b.ReportMetric(incr, "incr/s")
	b.ReportMetric(pfadd, "pfadd/s")
	b.ReportMetric(pfadd/incr, "pfadd/incr")
	flush(b, d.socket)
	// What PFADD left in PostgreSQL: sketch slot rows and their bytes.
	var rows, bytes float64
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*), pg_total_relation_size('counter_unique_slots')
		FROM counter_unique_slots`).Scan(&rows, &bytes); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rows, "sketch-rows")
	b.ReportMetric(bytes/float64(n), "table-B/pfadd")
	if _, err := exec.LookPath("redis-server"); err == nil {
		sock := filepath.Join(shortDir(b), "r.sock")
		srv := exec.Command("redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no")
		if err := srv.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
		waitSocket(b, sock)
		redis := benchRate(b, sock, n, "PFADD", "u:__rand_int__", "m__rand_int__")
		b.ReportMetric(redis, "redis-pfadd/s")
		b.ReportMetric(pfadd/redis, "pfadd/redis")
	}
}

// benchRate runs redis-benchmark with command args against socket and
// returns its requests per second.
func benchRate(b *testing.B, socket string, n int, args ...string) float64 {
	b.Helper()
	cmd := exec.Command("redis-benchmark", append([]string{"-s", socket, "-c", "50", "-P", "16",
		"-n", strconv.Itoa(n), "-r", "1000", "-q", "--csv"}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("redis-benchmark %v: %v\n%s", args, err, out)
	}
	recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(recs) < 2 || len(recs[1]) < 2 {
		b.Fatalf("redis-benchmark %v output: %q (%v)", args, out, err)
	}
	rate, err := strconv.ParseFloat(recs[1][1], 64)
	if err != nil {
		b.Fatal(err)
	}
	return rate
}

// waitSocket waits, bounded, until socket exists.
func waitSocket(b *testing.B, socket string) {
	b.Helper()
	for range 1000 {
		if _, err := os.Stat(socket); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond) // a benchmark's setup, not a test's outcome
	}
	b.Fatalf("%s did not appear", socket)
}
