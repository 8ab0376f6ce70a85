package report_test

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/report"
)

// TestPartitions writes two runs of plain PostgreSQL and two clusters and
// checks the cells, the ratios to plain within each run, PostgreSQL's CPU
// per committed increment and per slot row, the medians and the CSV
// columns.
func TestPartitions(t *testing.T) {
	t.Parallel()
	row := func(parts, run int, committed float64, pgCPU time.Duration) report.Row {
		// 1,000,000 increments over 1 s of load and 1 s of drain:
		// committed/s is half the stored total.
		stored := int64(committed * 2)
		return report.Row{Section: report.Partitions, Approach: report.Counterd, Partitions: parts, Run: run,
			Keys: "random of 100000", Clients: 50, Pipeline: 16, Elapsed: time.Second, Drain: time.Second,
			Increments: stored, Rate: float64(stored), Checked: true, Stored: stored, RowsWritten: stored / 4,
			CPU: report.CPU{Server: report.Share{Time: time.Second, Known: true}, PGServer: report.Share{Time: pgCPU, Known: true}}}
	}
	r := &report.Report{Rows: []report.Row{
		row(0, 1, 500_000, 2*time.Second),
		row(1, 1, 400_000, 2*time.Second),
		row(4, 1, 250_000, 2*time.Second),
		row(1, 2, 300_000, 3*time.Second),
		{Section: report.Partitions, Approach: report.Counterd, Partitions: 4, Run: 2, Missing: true, Note: "declaring the cluster failed: no psql"},
		row(0, 2, 600_000, 3*time.Second),
	}}
	var md bytes.Buffer
	if err := report.WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Partitions",
		"counterd-partitions.log",
		"not what it scales to",
		// 2 s of PostgreSQL for 1,000,000 committed (2 µs) and 250,000
		// slot rows (8 µs).
		"| PostgreSQL, no cluster | 1 | 1,000,000 | 1 s | 500,000 | 1.00× | 0.25 | 1 | 2 | 8 | exact |",
		"| 1 partition | 1 | 800,000 | 1 s | 400,000 | 0.80× | 0.25 | 1.25 | 2.5 | 10 | exact |",
		"| 4 partitions | 2 | — | — | — | — | — | — | — | — | missing: declaring the cluster failed: no psql |",
		// Run 2: 300,000 ÷ 600,000; 3 s for 600,000 committed.
		"| 1 partition | 2 | 600,000 | 1 s | 300,000 | 0.50× | 0.25 | 1.67 | 5 | 20 | exact |",
		"| 1 partition | 350,000 [300,000–400,000] | 0.65× [0.50×–0.80×] | 3.75 [2.5–5] | 15 [10–20] | 1.46 [1.25–1.67] |",
		"| 4 partitions | 250,000 | 0.50× | 4 | 16 | 2 |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("bench.md lacks %q:\n%s", want, md.String())
		}
	}
	var out bytes.Buffer
	if err := report.WriteCSV(&out, r.Rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) int { return slices.Index(report.Columns, name) }
	if got := recs[2][col("partitions")]; got != "1" {
		t.Errorf("partitions column: got %q; want 1", got)
	}
	if got := recs[2][col("pg_server_cpu_us_per_committed")]; got != "2.500" {
		t.Errorf("pg_server_cpu_us_per_committed: got %q; want 2.500", got)
	}
}

func TestPGMicrosPerCommitted(t *testing.T) {
	t.Parallel()
	f := func(r report.Row, perIncr, perRow float64) {
		t.Helper()
		if got := r.PGMicrosPerCommitted(); got != perIncr {
			t.Errorf("per committed increment: got %v; want %v", got, perIncr)
		}
		if got := r.PGMicrosPerSlotRow(); got != perRow {
			t.Errorf("per slot row: got %v; want %v", got, perRow)
		}
	}
	known := report.CPU{PGServer: report.Share{Time: time.Second, Known: true}}
	f(report.Row{Checked: true, Stored: 500_000, RowsWritten: 100_000, CPU: known}, 2, 10)
	f(report.Row{Checked: false, Stored: 500_000, RowsWritten: -1, CPU: known}, -1, -1)
	f(report.Row{Checked: true, Stored: 0, RowsWritten: 0, CPU: known}, -1, -1)
	f(report.Row{Checked: true, Stored: 500_000, RowsWritten: 100_000}, -1, -1)
}
