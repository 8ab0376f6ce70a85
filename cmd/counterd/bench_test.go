package main

import (
	"context"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/bench/loadgen"
	"github.com/counterd/counterd/internal/pgtest"
)

// BenchmarkJournalCost measures INCR throughput and p99 latency with 50
// pipelined clients (16 commands per round trip, 100,000 random keys)
// with the journal off and in each fsync mode, in one run:
//
//	make gobench BENCH=JournalCost
//
// ops/s and p99 are reported as custom metrics; ns/op is their inverse.
func BenchmarkJournalCost(b *testing.B) {
	for _, mode := range []struct{ name, env string }{
		{"journal=off", "COUNTERD_JOURNAL=false"},
		{"fsync=no", "COUNTERD_FSYNC=no"},
		{"fsync=everysec", "COUNTERD_FSYNC=everysec"},
		{"fsync=always", "COUNTERD_FSYNC=always"},
	} {
		b.Run(mode.name, func(b *testing.B) {
			db := pgtest.New(b, pgtest.Options{})
			d := startDaemon(b, db, mode.env)
			run := func(n int) loadgen.Result {
				res, err := loadgen.Run(context.Background(), loadgen.Config{
					Network: "unix", Addr: d.socket, Clients: 50, Pipeline: 16, Requests: n, Keys: 100000,
				})
				if err != nil {
					b.Fatal(err)
				}
				if res.Errors > 0 {
					b.Fatalf("%d error replies", res.Errors)
				}
				return res
			}
			run(20000) // warm up connections and the first rounds
			b.ResetTimer()
			res := run(b.N)
			b.StopTimer()
			b.ReportMetric(res.Rate(), "incr/s")
			b.ReportMetric(float64(res.P99)/float64(time.Microsecond), "p99-µs")
			flush(b, d.socket)
		})
	}
}

// BenchmarkIncrWhileGetBlocked measures unpipelined INCR latency from 8
// clients with nothing else going on, and while another connection's GET
// waits on a table another transaction has locked (rounds fail meanwhile,
// so increments pile up in memory and the journal):
//
//	make gobench BENCH=IncrWhileGetBlocked
//
// No increment may wait on a database query, so p99 should be about the
// same in both.
func BenchmarkIncrWhileGetBlocked(b *testing.B) {
	for _, blocked := range []bool{false, true} {
		name := "get=none"
		if blocked {
			name = "get=blocked"
		}
		b.Run(name, func(b *testing.B) {
			db := pgtest.New(b, pgtest.Options{})
			d := startDaemon(b, db, "COUNTERD_FLUSH_TIMEOUT=5m", "COUNTERD_LOCK_TIMEOUT=5m")
			ctx := context.Background()
			if blocked {
				tx, err := db.Pool.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, `LOCK TABLE counters, counter_slots IN ACCESS EXCLUSIVE MODE`); err != nil {
					b.Fatal(err)
				}
				reader := client(b, d.socket)
				go func() { _ = reader.Get(ctx, "post:1").Err() }()
				waitForLockWaiter(b, db)
			}
			res, err := loadgen.Run(ctx, loadgen.Config{
				Network: "unix", Addr: d.socket, Clients: 8, Pipeline: 1, Requests: max(b.N, 50000), Keys: 100000,
			})
			if err != nil {
				b.Fatal(err)
			}
			if res.Errors > 0 {
				b.Fatalf("%d error replies", res.Errors)
			}
			b.ReportMetric(res.Rate(), "incr/s")
			b.ReportMetric(float64(res.P50)/float64(time.Microsecond), "p50-µs")
			b.ReportMetric(float64(res.P99)/float64(time.Microsecond), "p99-µs")
		})
	}
}
