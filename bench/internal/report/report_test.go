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

	"github.com/counterd/counterd/bench/internal/report"
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
		Baseline:   "naive",
	}
	for _, d := range r.Dists {
		for _, c := range r.Clients {
			r.Rows = append(r.Rows,
				report.Row{Section: report.Matrix, Approach: "naive", Keys: d.Name, Clients: c, Pipeline: 1, Elapsed: time.Second,
					Increments: 1000 * int64(c), Rate: 1000 * float64(c), P50: 300 * time.Microsecond, P99: 2 * time.Millisecond,
					Checked: true, Stored: 900 * int64(c), RowsWritten: 1000 * int64(c)},
				report.Row{Section: report.Matrix, Approach: "counterd-p1", Keys: d.Name, Clients: c, Pipeline: 1, Elapsed: time.Second,
					Increments: 50000 * int64(c), Rate: 50000 * float64(c), P50: 20 * time.Microsecond, P99: 90 * time.Microsecond,
					Checked: true, Stored: 50000 * int64(c), RowsWritten: 40, Drain: 250 * time.Millisecond},
				report.Row{Section: report.Matrix, Approach: "redis-p1", Keys: d.Name, Clients: c, Missing: true, Note: "redis-server not found"},
			)
		}
	}
	r.Rows = append(r.Rows,
		report.Row{Section: report.Ceiling, Approach: "ceiling", Keys: "zipf", Clients: 1, Pipeline: 10000, Elapsed: time.Second,
			Increments: 150000, Rate: 150000, Checked: true, Stored: 150000, RowsWritten: 100000},
		report.Row{Section: report.Ceiling, Approach: "ceiling", Keys: "zipf", Clients: 2, Pipeline: 10000, Elapsed: time.Second,
			Increments: 300000, Rate: 300000, Checked: true, Stored: 300000, RowsWritten: 200000},
		report.Row{Section: report.Ingest, Approach: "counterd", Keys: "uniform", Clients: 50, Pipeline: 16, Run: 1, Elapsed: time.Second,
			Increments: 2000000, Rate: 900000, Checked: true, Stored: 2000000, RowsWritten: 100000,
			CPU: report.CPU{Server: report.Share{Time: 3 * time.Second, Known: true}, PG: report.Share{Time: 5 * time.Second, Known: true}}},
		report.Row{Section: report.Ingest, Approach: "redis-server", Keys: "uniform", Clients: 50, Pipeline: 16, Run: 1, Elapsed: time.Second,
			Increments: 2000000, Rate: 1800000, RowsWritten: -1},
		report.Row{Section: report.Latency, Approach: "counterd", Keys: "uniform", Clients: 50, Pipeline: 1, Elapsed: time.Second,
			Increments: 50000, Rate: 49990, Offered: 50000, P50: 40 * time.Microsecond, P99: time.Millisecond, RowsWritten: -1},
		report.Row{Section: report.Matrix, Approach: "probabilistic", Keys: "hot", Clients: 1, Increments: 10000, Rate: 5000,
			Checked: true, Stored: 10100, Estimate: true, Bound95: 1970, RowsWritten: 101},
		report.Row{Section: report.Sustain, Approach: "counterd", Keys: "zipf", Clients: 50, Pipeline: 16, Elapsed: 4 * time.Second,
			Increments: 600000, Rate: 150000, Offered: 150000, P50: time.Millisecond, P99: 3 * time.Millisecond,
			Checked: true, Stored: 600000, RowsWritten: 200000, Drain: time.Second, WriteRate: 50000, Rounds: 40,
			Series: series(0, 100, 120, 150, 170)},
	)
	return r
}

// series is one sample a second with these pending keys.
func series(pending ...float64) []report.Sample {
	out := make([]report.Sample, len(pending))
	for i, p := range pending {
		out[i] = report.Sample{Seconds: float64(i), PendingKeys: p, QueuedRounds: float64(i % 2), FlushKeys: 1000 * float64(i), FlushSeconds: 0.5 * float64(i)}
	}
	return out
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
	if counterd := recs[2]; col(counterd, "drain_seconds") != "0.2500" || col(counterd, "committed_rate") != "40000.0" {
		t.Errorf("counterd record %v: want drain_seconds 0.2500, committed_rate 40000.0", counterd)
	}
	if col(naive, "drain_seconds") != "" || col(naive, "committed_rate") != "" {
		t.Errorf("naive record %v: want no drain or committed rate", naive)
	}
	sus := recs[len(recs)-1]
	for name, want := range map[string]string{
		"section": "sustain", "committed_rate": "120000.0", "pending_max_first_half": "100", "pending_max_second_half": "170",
		"keeps_up": "false", "write_rows_per_s": "50000.0", "rounds": "40", "offered_per_s": "150000.0", "exact": "true",
	} {
		if got := col(sus, name); got != want {
			t.Errorf("sustain record: %s = %q; want %q", name, got, want)
		}
	}

	md, err := os.ReadFile(filepath.Join(dir, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"COUNTERBENCH_DURATION=1s make bench", "counterd's and redis-server's logs: counterd.log, redis-server.log", "| cores | ", "### hot: one key", "| naive | 1,000 (inexact) | 8,000 (inexact) |",
		"lost 100 (10%)", "missing: redis-server not found", "| counterd | 16 | 1 | 900,000 |", "| 1.5 | — | 2.5 | — | — | 0.05 |", "| 16 | — | — | 0.50× | — | 1.5 | 2.5 | — | — | — |",
		"estimate +100 (1%; ±1,970 at 95%)", "| zipf | 2 | 10,000 | 200,000 | 300,000 |", "| counterd | 50 | 50,000 | 49,990 |",
		"counterd, hot: committed increments per second (load + final FLUSH)", "| counterd-p1 | 40,000 | 320,000 |",
		"| counterd-p1 ÷ naive | 40× | 40× |", "| 250 ms | 40,000 |",
		"## Sustained load", "| pending keys, most in 1st / 2nd half | 100 / 170: falls behind |", "| final FLUSH (drain) | 1 s |",
		"| committed | 120,000 INCR/s (load + drain) |", "| rounds committed | 40, 5,000 slot rows each on average |",
		"| database write speed | 50,000 slot rows/s while a round is written |", "| time spent committing rounds | 50% of the load |",
		"| ceiling, zipf, 1 connection | 100,000 rows/s; counterd writes at 0.5× of it |", "| metric samples | 5 (sustain.csv) |",
		"](sustain.png)",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("bench.md lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("bench.md:\n%s", md)
	}

	for _, name := range []string{report.ChartFile, report.SustainChartFile} {
		png, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, format, err := image.Decode(png)
		png.Close()
		if err != nil || format != "png" || img.Bounds().Dx() < 500 {
			t.Fatalf("%s: %v, %q, %v; want a PNG at least 500 wide", name, err, format, img.Bounds())
		}
	}

	sf, err := os.Open(filepath.Join(dir, report.SustainCSVFile))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	samples, err := csv.NewReader(sf).ReadAll()
	if err != nil || len(samples) != 6 || strings.Join(samples[0], ",") != strings.Join(report.SeriesColumns, ",") ||
		strings.Join(samples[5], ",") != "counterd,zipf,4.000,170,0,4000,2,0,0" {
		t.Fatalf("sustain.csv: %v, %q; want a header and 5 samples, the last at 4 s with 170 pending", err, samples)
	}

	// A later run without a sustain section leaves no sustain files.
	r.Rows = r.Rows[:len(r.Rows)-1]
	if err := report.Write(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{report.SustainChartFile, report.SustainCSVFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s after a run without sustain: %v; want it removed", name, err)
		}
	}
	if got := strings.Join(r.Files(), ","); got != "bench.md,bench.csv,bench.png" {
		t.Errorf("files %s; want bench.md,bench.csv,bench.png", got)
	}
}

func TestKeepsUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		pending       []float64
		first, second float64
		ok, keepsUp   bool
	}{
		{"steady", []float64{0, 900, 1000, 950, 1100}, 900, 1100, true, true},
		{"at the limit", []float64{0, 1000, 1500, 1500}, 1000, 1500, true, true},
		{"growing", []float64{0, 1000, 1200, 1600, 3000}, 1000, 3000, true, false},
		{"idle", []float64{0, 0, 0}, 0, 0, true, true},
		{"only later", []float64{0, 0, 5}, 0, 5, true, false},
		{"one sample", []float64{7}, 0, 0, false, false},
		{"none", nil, 0, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := report.Row{Series: series(tc.pending...)}
			first, second, ok := r.PendingMax()
			if first != tc.first || second != tc.second || ok != tc.ok || r.KeepsUp() != tc.keepsUp {
				t.Fatalf("got %v, %v, %v, keeps up %v; want %v, %v, %v, %v", first, second, ok, r.KeepsUp(), tc.first, tc.second, tc.ok, tc.keepsUp)
			}
		})
	}
}

func TestCommittedRate(t *testing.T) {
	t.Parallel()
	f := func(r report.Row, want float64) {
		t.Helper()
		if got := r.CommittedRate(); got != want {
			t.Errorf("%+v: got %v; want %v", r, got, want)
		}
	}
	f(report.Row{Checked: true, Stored: 3000, Elapsed: 2 * time.Second, Drain: time.Second}, 1000)
	f(report.Row{Checked: true, Stored: 3000, Elapsed: 2 * time.Second}, -1)
	f(report.Row{Stored: 3000, Elapsed: 2 * time.Second, Drain: time.Second}, -1)
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
