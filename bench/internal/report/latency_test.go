package report_test

import (
	"bytes"
	"slices"
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

// TestLatencySeconds: a latency row measured second by second gets its
// worst second in bench.md (the fewest replies, the seconds with a reply
// later than 10 ms and 50 ms, the longest reply) and every second in
// latency-seconds.csv; a row without seconds gets neither.
func TestLatencySeconds(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	cd := report.Row{Section: report.Latency, Approach: report.Counterd, Keys: "uniform", Clients: 50, Pipeline: 1, Offered: 50_000,
		Rate: 50_000, Increments: 150_000, Elapsed: 3 * time.Second, Max: 120 * ms,
		Seconds: []report.Second{{Replies: 50_000, Max: 4 * ms}, {Replies: 44_000, Max: 120 * ms}, {Replies: 56_000, Max: 30 * ms}}}
	ev := report.Row{Section: report.Latency, Approach: report.RedisEverysec, Keys: "uniform", Clients: 50, Pipeline: 1, Offered: 50_000,
		Rate: 50_000, Increments: 150_000, Elapsed: 3 * time.Second, Max: 9 * ms}
	r := &report.Report{Rows: []report.Row{cd, ev}}
	md := markdownHas(t, r, "| counterd | 50,000 | 3 | 44,000 (second 2) | 2 | 1 | 120 ms (second 2) |")
	if n := strings.Count(md, "(second"); n != 2 {
		t.Errorf("bench.md names a second %d times; want twice, on counterd's line only (everysec's row has no seconds):\n%s", n, md)
	}
	if !slices.Contains(r.Files(), report.LatencySecondsFile) {
		t.Fatalf("files %v lack %s", r.Files(), report.LatencySecondsFile)
	}
	var buf bytes.Buffer
	if err := report.WriteSecondsCSV(&buf, r); err != nil {
		t.Fatal(err)
	}
	want := "approach,offered_per_s,clients,second,replies,max_us\n" +
		"counterd,50000,50,1,50000,4000\ncounterd,50000,50,2,44000,120000\ncounterd,50000,50,3,56000,30000\n"
	if buf.String() != want {
		t.Errorf("latency-seconds.csv:\n%s\nwant:\n%s", buf.String(), want)
	}
	if slices.Contains((&report.Report{Rows: []report.Row{ev}}).Files(), report.LatencySecondsFile) {
		t.Errorf("a report with no seconds measured lists %s", report.LatencySecondsFile)
	}
}
