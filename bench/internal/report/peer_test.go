package report_test

import (
	"bytes"
	"encoding/csv"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/report"
)

// TestPeer writes two runs of counterd and the Redis-buffer-plus-worker
// pattern at two depths and checks the committed ratios within runs
// against the 1.5× target, the CPU per increment of each side, the
// pattern's rows and the CSV's worker column.
func TestPeer(t *testing.T) {
	t.Parallel()
	share := func(d time.Duration) report.Share { return report.Share{Time: d, Known: true} }
	// 1,000,000 increments in 1 s of load and drain (committed/s =
	// 1,000,000 / (elapsed + drain)).
	row := func(server string, p, run int, elapsed time.Duration, c report.CPU) report.Row {
		return report.Row{Section: report.Ingest, Approach: server, Keys: "random of 100000", Clients: 50, Pipeline: p, Run: run,
			Elapsed: elapsed, Drain: 500 * time.Millisecond, Increments: 1_000_000, Rate: 1_000_000 / elapsed.Seconds(),
			RowsWritten: 250_000, Checked: true, Stored: 1_000_000, CPU: c}
	}
	counterd := report.CPU{Server: share(2 * time.Second), PG: share(time.Second)}
	peer := report.CPU{Server: share(time.Second), Worker: share(500 * time.Millisecond), PG: share(500 * time.Millisecond)}
	r := &report.Report{Rows: []report.Row{
		// 1,000,000/1s against 1,000,000/2s: 2×; run 2: 1.5/2.5: 1.67×.
		row(report.Counterd, 16, 1, 500*time.Millisecond, counterd),
		row(report.Peer, 16, 1, 1500*time.Millisecond, peer),
		row(report.Counterd, 16, 2, 1000*time.Millisecond, counterd),
		row(report.Peer, 16, 2, 2000*time.Millisecond, peer),
		// 1/1.5 against 1/1.5: 1×.
		row(report.Counterd, 1, 1, time.Second, counterd),
		row(report.Peer, 1, 1, time.Second, peer),
		{Section: report.Ingest, Approach: report.Peer, Pipeline: 1, Run: 2, Missing: true, Note: "redis-server did not start"},
	}}
	markdownHas(t, r,
		"peer-worker.log",
		"| redis-server everysec + worker → PostgreSQL | 16 | 1 | 666,666 | 0 | 0 | exact | 1 | 0.5 | 0.5 | — | — | 0.25 | 500,000 |",
		"| pipeline | committed: counterd ÷ pattern | target |",
		// CPU: counterd 2 + 1 µs, the pattern 1 + 0.5 + 0.5 µs.
		"| 16 | 1.83× [1.67×–2.00×] | met | 833,333 [666,666–1,000,000] | 450,000 [400,000–500,000] | 2 [2–2] | 1 [1–1] | 1 [1–1] | 0.5 [0.5–0.5] | 0.5 [0.5–0.5] | 1.5× [1.5×–1.5×] |",
		"| 1 | 1.00× | not met | 666,666 | 666,666 | 2 | 1 | 1 | 0.5 | 0.5 | 1.5× |",
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
	for rec, want := range map[int]string{1: "", 2: "0.500", 7: ""} {
		if got := recs[rec][col["worker_cpu_us_per_incr"]]; got != want {
			t.Errorf("record %d: worker_cpu_us_per_incr %q; want %q", rec, got, want)
		}
	}
	if got := recs[2][col["committed_rate"]]; got != "500000.0" {
		t.Errorf("pattern's committed_rate %q; want 500000.0", got)
	}
}
