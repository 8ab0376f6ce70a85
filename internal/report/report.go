// Package report writes a counter benchmark's results three ways: bench.md
// for people (the machine, how to reproduce, then tables), bench.csv for
// programs (one row per measured cell) and bench.png, a chart of
// throughput against concurrency with one line per approach and one panel
// per key distribution.
//
// A cell that could not run is still a row: Missing is set and Note says
// why, so a reader never mistakes an absent tool for a slow one.
package report

import (
	"fmt"
	"os"
	"path/filepath"
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
	// Missing says the cell could not run, and Note why. Note may also
	// carry a remark on a cell that ran.
	Missing bool
	Note    string
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
	Rows       []Row
}

// Files are the names Write creates in its directory.
const (
	MarkdownFile = "bench.md"
	CSVFile      = "bench.csv"
	ChartFile    = "bench.png"
)

// Write creates dir and writes the Markdown, CSV and chart into it.
func Write(dir string, r *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, f := range []struct {
		name  string
		write func(*os.File, *Report) error
	}{
		{MarkdownFile, func(f *os.File, r *Report) error { return WriteMarkdown(f, r) }},
		{CSVFile, func(f *os.File, r *Report) error { return WriteCSV(f, r.Rows) }},
		{ChartFile, func(f *os.File, r *Report) error { return WriteChart(f, r) }},
	} {
		path := filepath.Join(dir, f.name)
		file, err := os.Create(path)
		if err != nil {
			return err
		}
		err = f.write(file, r)
		if cerr := file.Close(); err == nil {
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
