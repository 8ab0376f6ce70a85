package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
)

// ingestClients and ingestKeys are redis-benchmark's -c and -r: the load
// a busy web tier's counters put on a sidecar.
const (
	ingestClients = 50
	ingestKeys    = 100000
)

// ingestServers are the ingest section's servers, in the first run's
// order: counterd, the Redis-buffer-plus-worker pattern, redis-server
// with appendfsync everysec and redis-server keeping nothing.
var ingestServers = []string{report.Counterd, report.Peer, report.RedisEverysec, report.RedisPlain}

// ingest runs the real redis-benchmark against each of ingestServers,
// with 16 commands per round trip and unpipelined, IngestRuns times.
// Each run measures every server at one depth before the next depth,
// starting with a different server each run, so no server always goes
// first after the machine's load changed. Then, unless the latency
// section covers it, counterd at the latency target's paced load.
func (b *bench) ingest(ctx context.Context) error {
	tool, lookErr := process.Lookup(b.cfg.RedisBenchmark, "redis-benchmark")
	servers := ingestServers
	for run := 1; run <= b.cfg.IngestRuns; run++ {
		for _, p := range []int{16, 1} {
			for i := range servers {
				target := servers[(i+run-1)%len(servers)]
				b.progress.step("ingest %s redis-benchmark -P %d -n %d (run %d)", target, p, b.cfg.IngestRequests, run)
				row := report.Row{
					Section: report.Ingest, Approach: target, Keys: fmt.Sprintf("random of %d", ingestKeys),
					Clients: ingestClients, Pipeline: p, Run: run, RowsWritten: -1,
				}
				err := b.ingestCell(ctx, tool, lookErr, &row)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				b.add(row, err)
			}
		}
	}
	return b.latencyTarget(ctx)
}

func (b *bench) ingestCell(ctx context.Context, tool string, lookErr error, row *report.Row) error {
	if benchmarkMissing(lookErr, row) {
		return nil
	}
	if row.Approach == report.Peer {
		return b.peerCell(ctx, tool, row)
	}
	if row.Approach == report.Counterd {
		srv, err := b.startCounterd(ctx)
		if err != nil {
			return err
		}
		_, err = b.counterdAround(ctx, srv, row, func() error { return b.redisBenchmark(ctx, tool, srv.socket, b.ingestLoad(row.Pipeline), row) })
		return err
	}
	srv, why := b.startRedisFlavor(ctx, flavorOf(row.Approach))
	if srv == nil {
		row.Missing, row.Note = true, why
		return nil
	}
	return srv.around(ctx, row, func() error { return b.redisBenchmark(ctx, tool, srv.socket, b.ingestLoad(row.Pipeline), row) })
}

// benchmarkMissing marks row missing, saying why, when redis-benchmark
// could not be found.
func benchmarkMissing(lookErr error, row *report.Row) bool {
	if lookErr == nil {
		return false
	}
	row.Missing = true
	row.Note = lookErr.Error() + "; install redis-tools (make bench does when it can) or set COUNTERBENCH_REDIS_BENCHMARK"
	return true
}

// latencyTargetCells are the servers the ingest section offers the
// latency target's load: none when the latency section offers it anyway.
func (b *bench) latencyTargetCells() []string {
	c := b.cfg
	if c.runs("latency") && c.LatencyClients == report.LatencyTargetClients && slices.Contains(c.LatencyRates, report.LatencyTargetRate) {
		return nil
	}
	return []string{report.Counterd, report.RedisEverysec}
}

// latencyTarget offers counterd, and redis-server with appendfsync
// everysec for reference, 50,000 unpipelined INCR/s from 50 clients for
// COUNTERBENCH_DURATION: the p99 target's load. Its rows are latency
// rows.
func (b *bench) latencyTarget(ctx context.Context) error {
	for _, target := range b.latencyTargetCells() {
		step := fmt.Sprintf("latency target %s %d/s from %d clients", target, report.LatencyTargetRate, report.LatencyTargetClients)
		if err := b.latencyCell(ctx, step, target, report.LatencyTargetRate, report.LatencyTargetClients); err != nil {
			return err
		}
	}
	return nil
}

// benchmarkLoad is one redis-benchmark run: its -c, -r, -n and -P, and
// the command with its arguments.
type benchmarkLoad struct {
	clients, keys, requests, pipeline int
	command                           []string
}

// ingestLoad is the ingest section's load at one pipeline depth.
func (b *bench) ingestLoad(pipeline int) benchmarkLoad {
	return benchmarkLoad{clients: ingestClients, keys: ingestKeys, requests: b.cfg.IngestRequests, pipeline: pipeline,
		command: []string{"incr", "post:__rand_int__"}}
}

// redisBenchmark runs one redis-benchmark and reads its CSV summary into
// row. It counts the -n requests as the increments: redis-benchmark
// reports no per-command errors, and the stored total checks them.
func (b *bench) redisBenchmark(ctx context.Context, tool, socket string, l benchmarkLoad, row *report.Row) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	start := time.Now()
	args := append([]string{"-s", socket,
		"-c", strconv.Itoa(l.clients), "-r", strconv.Itoa(l.keys),
		"-n", strconv.Itoa(l.requests), "-P", strconv.Itoa(l.pipeline),
		"--csv"}, l.command...)
	out, cpu, err := process.OutputCPU(ctx, tool, args...)
	if err != nil {
		return err
	}
	row.Elapsed = time.Since(start)
	row.CPU.Client = report.Share{Time: cpu, Known: true}
	s, err := parseBenchmarkCSV(out)
	if err != nil {
		return err
	}
	row.Increments = int64(l.requests)
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
