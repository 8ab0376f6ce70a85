package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/bench/process"
	"github.com/counterd/counterd/internal/bench/report"
)

// ingestClients and ingestKeys are redis-benchmark's -c and -r: the load
// a busy web tier's counters put on a sidecar.
const (
	ingestClients = 50
	ingestKeys    = 100000
)

// ingest runs the real redis-benchmark against counterd and redis-server,
// unpipelined and with 16 commands per round trip.
func (b *bench) ingest(ctx context.Context) error {
	tool, lookErr := process.Lookup(b.cfg.RedisBenchmark, "redis-benchmark")
	for _, target := range []string{"counterd", "redis-server"} {
		for _, p := range []int{1, 16} {
			b.progress.step("ingest %s redis-benchmark -P %d -n %d", target, p, b.cfg.IngestRequests)
			row := report.Row{
				Section: report.Ingest, Approach: target, Keys: fmt.Sprintf("random of %d", ingestKeys),
				Clients: ingestClients, Pipeline: p, RowsWritten: -1,
			}
			var err error
			switch {
			case lookErr != nil:
				row.Missing = true
				row.Note = lookErr.Error() + "; install redis-tools (make bench does when it can) or set COUNTERBENCH_REDIS_BENCHMARK"
			case target == "counterd":
				var srv *counterdServer
				if srv, err = b.startCounterd(ctx); err == nil {
					_, err = b.counterdAround(ctx, srv, &row, func() error { return b.redisBenchmark(ctx, tool, srv.socket, p, &row) })
				}
			default:
				if srv := b.startRedis(ctx); srv == nil {
					row.Missing, row.Note = true, b.redisAbsent
				} else {
					err = srv.around(ctx, &row, func() error { return b.redisBenchmark(ctx, tool, srv.socket, p, &row) })
				}
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(row, err)
		}
	}
	return nil
}

// redisBenchmark runs one redis-benchmark and reads its CSV summary into
// row. It counts the -n requests as the increments: redis-benchmark
// reports no per-command errors, and the stored total checks them.
func (b *bench) redisBenchmark(ctx context.Context, tool, socket string, pipeline int, row *report.Row) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := process.Output(ctx, tool, "-s", socket,
		"-c", strconv.Itoa(ingestClients), "-r", strconv.Itoa(ingestKeys),
		"-n", strconv.Itoa(b.cfg.IngestRequests), "-P", strconv.Itoa(pipeline),
		"--csv", "incr", "post:__rand_int__")
	if err != nil {
		return err
	}
	row.Elapsed = time.Since(start)
	s, err := parseBenchmarkCSV(out)
	if err != nil {
		return err
	}
	row.Increments = int64(b.cfg.IngestRequests)
	row.Rate, row.P50, row.P99 = s.rps, s.p50, s.p99
	return nil
}

// benchmarkSummary is one line of redis-benchmark --csv.
type benchmarkSummary struct {
	rps      float64
	p50, p99 time.Duration
}

// parseBenchmarkCSV reads redis-benchmark's --csv output: a header naming
// the columns (test, rps, ..., p50_latency_ms, p99_latency_ms, ...) and a
// line per test. Versions before 6 print no header and only test and rps.
func parseBenchmarkCSV(out []byte) (benchmarkSummary, error) {
	r := csv.NewReader(bytes.NewReader(out))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return benchmarkSummary{}, fmt.Errorf("redis-benchmark output: %w", err)
	}
	col := map[string]int{"test": 0, "rps": 1}
	var s benchmarkSummary
	found := false
	for _, rec := range recs {
		if len(rec) > 1 && rec[0] == "test" {
			for i, name := range rec {
				col[name] = i
			}
			continue
		}
		if len(rec) <= col["rps"] {
			continue
		}
		rps, err := strconv.ParseFloat(rec[col["rps"]], 64)
		if err != nil {
			continue
		}
		s.rps, found = rps, true
		ms := func(name string) time.Duration {
			i, ok := col[name]
			if !ok || i >= len(rec) {
				return 0
			}
			v, _ := strconv.ParseFloat(rec[i], 64)
			return time.Duration(v * float64(time.Millisecond))
		}
		s.p50, s.p99 = ms("p50_latency_ms"), ms("p99_latency_ms")
	}
	if !found {
		return s, errors.New("redis-benchmark printed no requests per second: " + oneLine(strings.TrimSpace(string(out))))
	}
	return s, nil
}
