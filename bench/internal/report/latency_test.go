package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/report"
)

// TestLatencyAgainstEverysec: per offered rate, counterd's p99 against
// redis-server everysec's and its longest latency against 100 ms, each
// judged on its own; a rate without everysec measured gets no line.
func TestLatencyAgainstEverysec(t *testing.T) {
	t.Parallel()
	row := func(server string, rate float64, p99, p999, max time.Duration) report.Row {
		return report.Row{Section: report.Latency, Approach: server, Keys: "uniform", Clients: 50, Pipeline: 1, Offered: rate,
			Rate: rate, Increments: int64(rate), Elapsed: time.Second, P99: p99, P999: p999, Max: max}
	}
	ms := time.Millisecond
	r := &report.Report{Rows: []report.Row{
		row(report.Counterd, 10_000, 2*ms, 5*ms, 40*ms),
		row(report.RedisEverysec, 10_000, 3*ms, 4*ms, 9*ms),
		row(report.RedisPlain, 10_000, ms, 2*ms, 3*ms),
		row(report.Counterd, 50_000, 30*ms, 90*ms, 150*ms),
		row(report.RedisEverysec, 50_000, 2*ms, 6*ms, 20*ms),
		row(report.Counterd, 25_000, ms, 2*ms, 3*ms),
	}}
	md := markdownHas(t, r,
		"| server | clients | offered/s | achieved/s | p50 | p99 | p99.9 | max | total |",
		"| counterd | 50 | 50,000 | 50,000 | 0 | 30 ms | 90 ms | 150 ms |",
		"| 10,000 | 50 | 2 ms / 3 ms | met | 5 ms / 4 ms | 40 ms / 9 ms | met |",
		"| 50,000 | 50 | 30 ms / 2 ms | not met | 90 ms / 6 ms | 150 ms / 20 ms | not met |",
	)
	if strings.Contains(md, "| 25,000 | 50 |") {
		t.Errorf("bench.md judges 25,000/s, where everysec was not measured")
	}
}
