// Package report writes a counter benchmark's results three ways: bench.md
// for people (the machine, how to reproduce, then tables), bench.csv for
// programs (one row per measured cell) and bench.png, a chart of
// throughput against concurrency with one line per approach and one panel
// per key distribution. A run with a sustained load also gets
// sustain.png, counterd's pending keys over time, and sustain.csv, every
// metric sample behind it.
//
// A cell that could not run is still a row: Missing is set and Note says
// why, so a reader never mistakes an absent tool for a slow one.
package report

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sections of a report.
const (
	// Matrix cells are one approach at one concurrency and distribution.
	Matrix = "matrix"
	// Ceiling cells are PostgreSQL's best multi-row upsert.
	Ceiling = "ceiling"
	// Ingest cells are redis-benchmark runs.
	Ingest = "ingest"
	// Latency cells are paced loads.
	Latency = "latency"
	// Sustain cells are a long paced load on counterd with its metrics
	// sampled over time.
	Sustain = "sustain"
	// Windows cells are counterd without time windows and with three
	// (COUNTERD_WINDOWS), under the same load.
	Windows = "windows"
	// Uniques cells are redis-benchmark runs of INCR, PFADD and INCRONCE
	// side by side.
	Uniques = "uniques"
	// Partitions cells are redis-benchmark runs of counterd on plain
	// PostgreSQL and on PL/Proxy clusters of several sizes.
	Partitions = "partitions"
)

// Row is one measured cell.
type Row struct {
	Section  string
	Approach string
	// Keys names the key distribution.
	Keys    string
	Clients int
	// Pipeline is commands per round trip; for ceiling rows, keys per
	// statement.
	Pipeline int
	Elapsed  time.Duration
	// Increments counts increments acknowledged (for ceiling rows, the
	// increments the upserted rows carried); Errors those refused.
	Increments, Errors int64
	// Rate is increments per second; Offered, when positive, the rate the
	// load asked for.
	Rate, Offered float64
	P50, P99      time.Duration
	// P999 and Max are the 99.9th percentile and longest latency, where
	// the section measures them (the latency section); zero otherwise.
	P999, Max time.Duration
	// Checked says whether the stored total was read back; Stored is
	// how much it grew.
	Checked bool
	Stored  int64
	// Estimate marks a total that is an estimate; Bound95 is its 95%
	// error bound.
	Estimate bool
	Bound95  int64
	// RowsWritten counts database rows written; -1 when the approach
	// writes no database rows.
	RowsWritten int64
	// Drain is how long the final FLUSH took to commit what the load
	// left pending; zero for approaches that commit before they
	// acknowledge.
	Drain time.Duration
	// WriteRate is counterd's slot rows written per second of round
	// commits (0 when unknown); Rounds counts the rounds committed.
	// Both cover the load and the drain. Sustain rows only, and Rounds
	// also for counterd's uniques rows.
	WriteRate float64
	Rounds    int64
	// Series is counterd's metrics sampled during the load, from its
	// start to its end. Sustain rows only.
	Series []Sample
	// Run numbers a repetition of the same cell (1, 2, ...); 0 for
	// sections that do not repeat. Ingest rows only.
	Run int
	// CPU is the CPU time the servers spent on the cell.
	CPU CPU
	// Command names what a uniques row sent: INCR, PFADD, or INCRONCE
	// with the share of repeats it aimed at. Uniques rows only.
	Command string
	// New counts, for PFADD, the distinct members the sketches hold
	// afterwards (summed over the keys); for INCRONCE, the views counted.
	// SeenRows counts, for INCRONCE, the seen-set rows the cell left:
	// one per key and visitor counted, so it must equal New. Both -1 when
	// not read. Uniques rows only.
	New, SeenRows int64
	// WALBytes is the WAL the whole PostgreSQL server wrote during the
	// cell (pg_current_wal_lsn before it and after counterd's final
	// FLUSH); 0 when not measured.
	WALBytes int64
	// Seconds is the load second by second, from its start: replies and
	// the longest latency of the commands due in each. Latency rows only.
	Seconds []Second
	// Partitions is the PL/Proxy cluster's partition count counterd
	// wrote through; 0 for plain PostgreSQL. Partitions rows only.
	Partitions int
	// Daemons is how many counterd daemons shared the load (0 for the
	// peer); DaemonCPU each one's own CPU, in the order they started;
	// Transactions the database's commits and rollbacks during the cell,
	// less the benchmark's own (-1 when not read); Staleness how long
	// increments took to show in SQL. Fleet rows only.
	Daemons      int
	DaemonCPU    []time.Duration
	Transactions int64
	Staleness    Staleness
	// Members is the set members the cell's keys hold afterwards: their
	// SCARDs summed (counterd, redis-server) or the likes rows (the
	// application's pattern). Sets rows only; New there counts the
	// members the replies said were new.
	Members int64
	// Missing says the cell could not run, and Note why. Note may also
	// carry a remark on a cell that ran.
	Missing bool
	Note    string
}

// Second is one second of a paced load: replies to the commands due in
// it, and the longest latency among them.
type Second struct {
	Replies int64
	Max     time.Duration
}

// Sample is one scrape of counterd's metrics.
type Sample struct {
	// Seconds since the load started.
	Seconds float64
	// PendingKeys and QueuedRounds are gauges: keys accumulating for the
	// next round, and rounds waiting for the database.
	PendingKeys, QueuedRounds float64
	// FlushKeys is counterd_flush_keys_total, FlushSeconds the sum of
	// counterd_flush_duration_seconds, and BatchKeysSum and
	// BatchKeysCount the sum and count of counterd_flush_batch_keys.
	FlushKeys, FlushSeconds, BatchKeysSum, BatchKeysCount float64
}

// CPU is a cell's CPU time, read from /proc/PID/stat (utime+stime, all
// threads) before and after it: the server under measurement (counterd or
// redis-server); for counterd, the PostgreSQL backends serving its
// connections; and the whole PostgreSQL server (every process of its
// postmaster), which also counts other clients' work on a shared server.
// counterd's readings end after its final FLUSH, so the rounds that drain
// the cell count too. For the peer (the Redis-buffer-plus-worker pattern)
// Server is redis-server, Worker the worker process and PG the worker's
// backends, read after its drain. Client is the load generator's own
// (redis-benchmark's, from the kernel when it exited): the same work for
// every server, taken from the cores they share.
type CPU struct {
	Server, Worker, PG, PGServer, Client Share
}

// Share is one CPU reading's difference; Known is false when it could not
// be read (no /proc, a server on another machine).
type Share struct {
	Time  time.Duration
	Known bool
}

// MicrosPerIncr is a share's CPU microseconds per increment, or -1.
func (r Row) MicrosPerIncr(s Share) float64 {
	if !s.Known || r.Increments <= 0 {
		return -1
	}
	return float64(s.Time) / float64(time.Microsecond) / float64(r.Increments)
}

// Exact reports whether the stored total equals the increments.
func (r Row) Exact() bool { return r.Checked && r.Stored == r.Increments }

// Diff is the stored total minus the increments acknowledged.
func (r Row) Diff() int64 { return r.Stored - r.Increments }

// RowsPerIncrement is database rows written per increment, or -1.
func (r Row) RowsPerIncrement() float64 {
	if r.RowsWritten < 0 || r.Increments == 0 {
		return -1
	}
	return float64(r.RowsWritten) / float64(r.Increments)
}

// RowRate is database rows written per second, or -1.
func (r Row) RowRate() float64 {
	if r.RowsWritten < 0 || r.Elapsed <= 0 {
		return -1
	}
	return float64(r.RowsWritten) / r.Elapsed.Seconds()
}

// CommittedRate is increments stored per second of load plus drain: the
// rate at which increments reach the database, not just an
// acknowledgement. It is -1 for rows without a drain.
func (r Row) CommittedRate() float64 {
	if !r.Checked || r.Drain <= 0 || r.Elapsed <= 0 {
		return -1
	}
	return float64(r.Stored) / (r.Elapsed + r.Drain).Seconds()
}

// Approach names and describes one line of the matrix.
type Approach struct {
	Name, Summary string
}

// Dist names and describes one key distribution.
type Dist struct {
	Name, Summary string
}

// Report is everything one run produced.
type Report struct {
	Machine Machine
	// Command reproduces the run.
	Command string
	Started time.Time
	Elapsed time.Duration
	// Settings are shown under the machine, in order.
	Settings [][2]string
	// Approaches, Dists and Clients give the matrix's order.
	Approaches []Approach
	Dists      []Dist
	Clients    []int
	// Baseline names the approach whose rate counterd's committed rate
	// is divided by; "" for none.
	Baseline string
	Rows     []Row
	// BudgetPart holds the budget and tickets sections.
	BudgetPart
}

// Empty reports whether the run measured nothing at all.
func (r *Report) Empty() bool { return len(r.Rows) == 0 && r.BudgetPart.empty() }

// Files are the names Write creates in its directory; the sustain files
// only for a report with a sustain row.
const (
	MarkdownFile     = "bench.md"
	CSVFile          = "bench.csv"
	ChartFile        = "bench.png"
	SustainChartFile = "sustain.png"
	SustainCSVFile   = "sustain.csv"
	// LatencySecondsFile is every latency row second by second.
	LatencySecondsFile = "latency-seconds.csv"
)

// Logs the benchmark writes beside the report, not Write: everything
// counterd and redis-server printed during the run. bench.md names them.
const (
	CounterdLogFile = "counterd.log"
	RedisLogFile    = "redis-server.log"
	// RedisAOFLogFile is what redis-server with appendfsync everysec
	// printed.
	RedisAOFLogFile = "redis-server-everysec.log"
	// BudgetLogFile is what the budget section's daemons printed.
	BudgetLogFile = "counterd-budget.log"
	// UniquesLogFile is what the uniques section's daemon printed.
	UniquesLogFile = "counterd-uniques.log"
	// PartitionsLogFile is what the partitions section's daemons
	// printed.
	PartitionsLogFile = "counterd-partitions.log"
)

type file struct {
	name  string
	write func(io.Writer, *Report) error
}

func (r *Report) files() []file {
	out := []file{
		{MarkdownFile, WriteMarkdown},
		{CSVFile, func(w io.Writer, r *Report) error { return WriteCSV(w, r.Rows) }},
		{ChartFile, WriteChart},
	}
	if len(section(r.Rows, Sustain)) > 0 {
		out = append(out, file{SustainChartFile, WriteSustainChart}, file{SustainCSVFile, WriteSeriesCSV})
	}
	if slices.ContainsFunc(section(r.Rows, Latency), func(x Row) bool { return len(x.Seconds) > 0 }) {
		out = append(out, file{LatencySecondsFile, WriteSecondsCSV})
	}
	if len(section(r.Rows, Fleet)) > 0 {
		out = append(out, file{FleetChartFile, WriteFleetChart})
	}
	if !r.BudgetPart.empty() {
		out = append(out, file{BudgetCSVFile, func(w io.Writer, r *Report) error { return WriteBudgetCSV(w, &r.BudgetPart) }})
	}
	return out
}

// Files lists the names Write creates for r.
func (r *Report) Files() []string {
	var out []string
	for _, f := range r.files() {
		out = append(out, f.name)
	}
	return out
}

// Write creates dir and writes the Markdown, CSV and charts into it. It
// removes sustain, budget and fleet files an earlier run left when r has none, so bench.md
// and the files beside it always come from the same run.
func Write(dir string, r *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	files := r.files()
	for _, stale := range []string{SustainChartFile, SustainCSVFile, BudgetCSVFile, LatencySecondsFile, FleetChartFile} {
		if !slices.ContainsFunc(files, func(f file) bool { return f.name == stale }) {
			if err := os.Remove(filepath.Join(dir, stale)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove stale %s: %w", stale, err)
			}
		}
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		fh, err := os.Create(path)
		if err != nil {
			return err
		}
		err = f.write(fh, r)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// Thousands formats n with comma separators.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Duration formats a latency with three significant digits.
func Duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Microsecond:
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.3g µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.3g ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.3g s", d.Seconds())
	}
}
