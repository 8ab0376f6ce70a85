package report_test

import (
	"encoding/csv"
	"image"
	_ "image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/report"
)

func sample() *report.Report {
	r := &report.Report{
		Machine:    report.DescribeMachine(),
		Command:    "COUNTERBENCH_DURATION=1s make bench",
		Started:    time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Elapsed:    time.Minute,
		Settings:   [][2]string{{"duration per cell", "1s"}},
		Approaches: []report.Approach{{"naive", "read then write"}, {"counterd-p1", "counterd"}, {"redis-p1", "redis"}},
		Dists:      []report.Dist{{"hot", "one key"}, {"uniform", "uniform"}},
		Clients:    []int{1, 8},
	}
	for _, d := range r.Dists {
		for _, c := range r.Clients {
			r.Rows = append(r.Rows,
				report.Row{Section: report.Matrix, Approach: "naive", Keys: d.Name, Clients: c, Pipeline: 1, Elapsed: time.Second,
					Increments: 1000 * int64(c), Rate: 1000 * float64(c), P50: 300 * time.Microsecond, P99: 2 * time.Millisecond,
					Checked: true, Stored: 900 * int64(c), RowsWritten: 1000 * int64(c)},
				report.Row{Section: report.Matrix, Approach: "counterd-p1", Keys: d.Name, Clients: c, Pipeline: 1, Elapsed: time.Second,
					Increments: 50000 * int64(c), Rate: 50000 * float64(c), P50: 20 * time.Microsecond, P99: 90 * time.Microsecond,
					Checked: true, Stored: 50000 * int64(c), RowsWritten: 40},
				report.Row{Section: report.Matrix, Approach: "redis-p1", Keys: d.Name, Clients: c, Missing: true, Note: "redis-server not found"},
			)
		}
	}
	r.Rows = append(r.Rows,
		report.Row{Section: report.Ceiling, Approach: "ceiling", Keys: "zipf", Clients: 2, Pipeline: 10000, Elapsed: time.Second,
			Increments: 300000, Rate: 300000, Checked: true, Stored: 300000, RowsWritten: 200000},
		report.Row{Section: report.Ingest, Approach: "counterd", Keys: "uniform", Clients: 50, Pipeline: 16, Elapsed: time.Second,
			Increments: 2000000, Rate: 900000, Checked: true, Stored: 2000000, RowsWritten: 100000},
		report.Row{Section: report.Ingest, Approach: "redis-server", Keys: "uniform", Clients: 50, Pipeline: 16, Elapsed: time.Second,
			Increments: 2000000, Rate: 1800000, RowsWritten: -1},
		report.Row{Section: report.Latency, Approach: "counterd", Keys: "uniform", Clients: 50, Pipeline: 1, Elapsed: time.Second,
			Increments: 50000, Rate: 49990, Offered: 50000, P50: 40 * time.Microsecond, P99: time.Millisecond, RowsWritten: -1},
		report.Row{Section: report.Matrix, Approach: "probabilistic", Keys: "hot", Clients: 1, Increments: 10000, Rate: 5000,
			Checked: true, Stored: 10100, Estimate: true, Bound95: 1970, RowsWritten: 101},
	)
	return r
}

func TestWrite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "out")
	r := sample()
	if err := report.Write(dir, r); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(filepath.Join(dir, report.CSVFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(r.Rows)+1 || strings.Join(recs[0], ",") != strings.Join(report.Columns, ",") {
		t.Fatalf("csv: %d records, header %v; want %d and %v", len(recs), recs[0], len(r.Rows)+1, report.Columns)
	}
	naive := recs[1]
	col := func(rec []string, name string) string {
		for i, c := range report.Columns {
			if c == name {
				return rec[i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	if col(naive, "exact") != "false" || col(naive, "diff") != "-100" || col(naive, "rows_per_incr") != "1.000000" {
		t.Errorf("naive record %v: want exact false, diff -100, rows_per_incr 1", naive)
	}
	if missing := recs[3]; col(missing, "missing") != "true" || col(missing, "note") != "redis-server not found" || col(missing, "incr_per_s") != "" {
		t.Errorf("missing record %v", missing)
	}

	md, err := os.ReadFile(filepath.Join(dir, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"COUNTERBENCH_DURATION=1s make bench", "| cores | ", "### hot: one key", "| naive | 1,000 (inexact) | 8,000 (inexact) |",
		"lost 100 (10%)", "missing: redis-server not found", "| counterd | 16 | 900,000 |", "| 0.50 |",
		"estimate +100 (1%; ±1,970 at 95%)", "| zipf | 2 | 10,000 | 200,000 | 300,000 |", "| counterd | 50 | 50,000 | 49,990 |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("bench.md lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("bench.md:\n%s", md)
	}

	png, err := os.Open(filepath.Join(dir, report.ChartFile))
	if err != nil {
		t.Fatal(err)
	}
	defer png.Close()
	img, format, err := image.Decode(png)
	if err != nil || format != "png" || img.Bounds().Dx() < 500 {
		t.Fatalf("chart: %v, %q, %v; want a PNG at least 500 wide", err, format, img.Bounds())
	}
}

func TestFormats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{report.Thousands(0), "0"},
		{report.Thousands(999), "999"},
		{report.Thousands(1000), "1,000"},
		{report.Thousands(-1234567), "-1,234,567"},
		{report.Duration(0), "0"},
		{report.Duration(850), "850 ns"},
		{report.Duration(12345 * time.Nanosecond), "12.3 µs"},
		{report.Duration(4567 * time.Microsecond), "4.57 ms"},
		{report.Duration(2500 * time.Millisecond), "2.5 s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q; want %q", tc.got, tc.want)
		}
	}
}

func TestDescribeMachine(t *testing.T) {
	t.Parallel()
	m := report.DescribeMachine()
	if m.Cores < 1 || m.Go == "" || m.OS == "" {
		t.Fatalf("machine %+v: want cores, Go and OS", m)
	}
}
