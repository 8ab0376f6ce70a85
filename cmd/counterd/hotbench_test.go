package main

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/bench/loadgen"
	"github.com/counterd/counterd/internal/pgtest"
)

// BenchmarkHotKeys compares sampling the viral key
// (COUNTERD_SAMPLE_KEYS=post:viral) with counting it exactly (the default) on one
// viral key plus a Zipf tail over a million keys (a third of the events go
// to the viral key), in one run:
//
//	make gobench BENCH=HotKeys   # HOTBENCH_SECONDS=60 by default
//
// It reports, per strategy, slot rows written and journal bytes per
// second, the viral key's 95% error bound after 1 s, 10 s and the whole
// run, and the p50/p99 INCR latency on the viral key under
// COUNTERD_ACK=commit with 8 unpipelined clients. It runs once whatever
// b.N is.
func BenchmarkHotKeys(b *testing.B) {
	secs := 60
	if s, err := strconv.Atoi(os.Getenv("HOTBENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	for _, strategy := range []string{"sample", "exact"} {
		sampleKeys := "COUNTERD_SAMPLE_KEYS="
		if strategy == "sample" {
			sampleKeys += "post:viral"
		}
		b.Run("strategy="+strategy, func(b *testing.B) {
			db := pgtest.New(b, pgtest.Options{})
			d := startDaemon(b, db, sampleKeys)
			key := zipfKeys()
			ctx := context.Background()
			before := scrape(b, d)
			start := time.Now()
			errAt := map[int]int64{}
			for _, at := range []int{1, 10, secs} {
				if at > secs || errAt[at] != 0 {
					continue
				}
				// A checkpoint the previous COUNT (which waits for the
				// round in flight) already passed is measured at once.
				if left := time.Until(start.Add(time.Duration(at) * time.Second)); left > 0 {
					res, err := loadgen.Run(ctx, loadgen.Config{
						Network: "unix", Addr: d.socket, Clients: 8, Pipeline: 16, Duration: left, Key: key,
					})
					if err != nil {
						b.Fatal(err)
					}
					if res.Errors > 0 {
						b.Fatalf("%d error replies", res.Errors)
					}
				}
				_, _, bound := count(b, d.socket, "post:viral")
				errAt[at] = bound
				b.Logf("%s: error bound ±%d after %.1fs (checkpoint %ds)", strategy, bound, time.Since(start).Seconds(), at)
			}
			elapsed := time.Since(start).Seconds()
			flush(b, d.socket)
			after := scrape(b, d)
			b.ReportMetric((after["counterd_flush_batch_keys_sum"]-before["counterd_flush_batch_keys_sum"])/elapsed, "rows/s")
			b.ReportMetric((after["counterd_journal_appended_bytes_total"]-before["counterd_journal_appended_bytes_total"])/elapsed, "journal-B/s")
			b.ReportMetric((after["counterd_increments_accepted_total"]-before["counterd_increments_accepted_total"])/elapsed, "recorded/s")
			b.ReportMetric(float64(errAt[1]), "err95@1s")
			b.ReportMetric(float64(errAt[10]), "err95@10s")
			b.ReportMetric(float64(errAt[secs]), "err95@end")
			d.stop()

			// The viral key alone under COUNTERD_ACK=commit.
			c := startDaemon(b, db, sampleKeys, "COUNTERD_ACK=commit")
			res, err := loadgen.Run(ctx, loadgen.Config{
				Network: "unix", Addr: c.socket, Clients: 8, Pipeline: 1, Duration: 5 * time.Second,
				Key: func(*rand.Rand, int, int) string { return "post:viral" },
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(res.P50)/float64(time.Microsecond), "commit-p50-µs")
			b.ReportMetric(float64(res.P99)/float64(time.Microsecond), "commit-p99-µs")
			b.ReportMetric(res.Rate(), "commit-incr/s")
		})
	}
}

// zipfKeys sends a third of the events to post:viral and the rest to a
// Zipf-distributed tail over a million keys.
func zipfKeys() func(*rand.Rand, int, int) string {
	// One generator per client; each client touches only its own.
	zipfs := make([]*rand.Zipf, 64)
	return func(rng *rand.Rand, client, _ int) string {
		if rng.IntN(3) == 0 {
			return "post:viral"
		}
		z := zipfs[client]
		if z == nil {
			z = rand.NewZipf(rng, 1.1, 1, 1_000_000-1)
			zipfs[client] = z
		}
		return "post:" + strconv.FormatUint(z.Uint64(), 10)
	}
}

// scrape reads the daemon's counters from /metrics.
func scrape(b *testing.B, d *daemon) map[string]float64 {
	b.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(httpGet(b, "http://"+d.metricsAddr()+"/metrics")))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if f, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = f
		}
	}
	return out
}
