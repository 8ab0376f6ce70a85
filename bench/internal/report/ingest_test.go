package report_test

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/report"
)

// TestIngest writes two runs of the three servers at two pipeline depths
// and checks the side-by-side ratios (median and range within runs), the
// CPU per increment, the targets' verdicts and the CSV's CPU columns.
func TestIngest(t *testing.T) {
	t.Parallel()
	cpu := func(server, pg time.Duration) report.CPU {
		c := report.CPU{Server: report.Share{Time: server, Known: true}}
		if pg > 0 {
			c.PG = report.Share{Time: pg, Known: true}
			c.PGServer = report.Share{Time: 2 * pg, Known: true}
		}
		return c
	}
	row := func(server string, p, run int, rate float64, c report.CPU) report.Row {
		return report.Row{Section: report.Ingest, Approach: server, Keys: "random of 100000", Clients: 50, Pipeline: p, Run: run,
			Elapsed: time.Second, Increments: 1_000_000, Rate: rate, RowsWritten: -1, Checked: true, Stored: 1_000_000, CPU: c}
	}
	r := &report.Report{Rows: []report.Row{
		row(report.Counterd, 16, 1, 900_000, cpu(2*time.Second, time.Second)),
		row(report.RedisEverysec, 16, 1, 1_000_000, cpu(time.Second, 0)),
		row(report.RedisPlain, 16, 1, 1_500_000, cpu(800*time.Millisecond, 0)),
		row(report.Counterd, 16, 2, 600_000, cpu(3*time.Second, time.Second)),
		row(report.RedisEverysec, 16, 2, 1_200_000, cpu(time.Second, 0)),
		row(report.RedisPlain, 16, 2, 1_200_000, cpu(1200*time.Millisecond, 0)),
		row(report.Counterd, 1, 1, 110_000, cpu(20*time.Second, 10*time.Second)),
		row(report.RedisEverysec, 1, 1, 100_000, cpu(10*time.Second, 0)),
		{Section: report.Ingest, Approach: report.RedisPlain, Pipeline: 1, Run: 1, Missing: true, Note: "redis-server did not start"},
		{Section: report.Latency, Approach: report.Counterd, Keys: "uniform", Clients: 50, Pipeline: 1, Offered: 50_000, Rate: 49_990,
			Increments: 50_000, P99: 900 * time.Microsecond, Elapsed: time.Second},
		{Section: report.Latency, Approach: report.Counterd, Keys: "uniform", Clients: 50, Pipeline: 1, Offered: 50_000, Rate: 49_000,
			Increments: 50_000, P99: 3 * time.Millisecond, Elapsed: time.Second},
	}}
	r.Rows[0].RowsWritten = 250_000
	r.Rows[0].CPU.Client = report.Share{Time: 3 * time.Second, Known: true}
	markdownHas(t, r,
		"| counterd | 16 | 1 | 900,000 | 0 | 0 | exact | 2 | — | 1 | 2 | 3 | 0.25 |",
		"| redis-server (appendfsync everysec) | 16 | 2 | 1,200,000 |",
		"| redis-server (no persistence) | 1 | 1 | — | — | — | missing: redis-server did not start |",
		// 0.9 and 0.5 within runs; 0.6 and 0.5 against no persistence.
		"| 16 | 0.70× [0.50×–0.90×] | not met | 0.55× [0.50×–0.60×] | 0.83× [0.67×–1.00×] | 2.5 [2–3] | 1 [1–1] | 1 [1–1] | 1 [0.8–1.2] | 3.5× [3×–4×] |",
		"| 1 | 1.10× | met | — | — | 20 | 10 | 10 | — | 3× |",
		"counterd p99 900 µs (achieved 49,990/s): **met**",
		"counterd p99 3 ms (achieved 49,000/s): **not met**",
	)

	var buf bytes.Buffer
	if err := report.WriteCSV(&buf, r.Rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, c := range recs[0] {
		col[c] = i
	}
	for _, tc := range []struct {
		rec                           int
		run, server, pg, pgsv, client string
	}{
		{1, "1", "2.000", "1.000", "2.000", "3.000"},
		{2, "1", "1.000", "", "", ""},
		{9, "1", "", "", "", ""}, // missing
		{10, "", "", "", "", ""}, // latency: not measured here
	} {
		rec := recs[tc.rec]
		got := []string{rec[col["run"]], rec[col["server_cpu_us_per_incr"]], rec[col["pg_cpu_us_per_incr"]], rec[col["pg_server_cpu_us_per_incr"]], rec[col["client_cpu_us_per_incr"]]}
		if want := []string{tc.run, tc.server, tc.pg, tc.pgsv, tc.client}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("record %d: run and cpu columns %q; want %q", tc.rec, got, want)
		}
	}
}

func TestMicrosPerIncr(t *testing.T) {
	t.Parallel()
	f := func(r report.Row, s report.Share, want float64) {
		t.Helper()
		if got := r.MicrosPerIncr(s); got != want {
			t.Errorf("%v over %d: got %v; want %v", s, r.Increments, got, want)
		}
	}
	f(report.Row{Increments: 1000}, report.Share{Time: 10 * time.Millisecond, Known: true}, 10)
	f(report.Row{Increments: 1000}, report.Share{Known: true}, 0)
	f(report.Row{Increments: 1000}, report.Share{Time: time.Second}, -1)
	f(report.Row{}, report.Share{Time: time.Second, Known: true}, -1)
}
