package report

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// PartitionsLabel names a partitions setup: plain PostgreSQL for 0.
func PartitionsLabel(n int) string {
	switch n {
	case 0:
		return "PostgreSQL, no cluster"
	case 1:
		return "1 partition"
	}
	return strconv.Itoa(n) + " partitions"
}

// PGMicrosPerCommitted is the whole PostgreSQL server's CPU per increment
// committed (the stored total's growth, which includes the final FLUSH),
// or -1 when either is unknown.
func (r Row) PGMicrosPerCommitted() float64 {
	return perUnit(r.CPU.PGServer, r.Checked, r.Stored)
}

// PGMicrosPerSlotRow is the whole PostgreSQL server's CPU per slot row
// counterd wrote, or -1 when either is unknown.
func (r Row) PGMicrosPerSlotRow() float64 {
	return perUnit(r.CPU.PGServer, r.RowsWritten >= 0, r.RowsWritten)
}

func perUnit(s Share, known bool, n int64) float64 {
	if !s.Known || !known || n <= 0 {
		return -1
	}
	return float64(s.Time) / float64(time.Microsecond) / float64(n)
}

func partitions(b *bufio.Writer, r *Report) {
	rows := section(r.Rows, Partitions)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Partitions\n\n")
	fmt.Fprintf(b, "The ingest section's `-P 16` load (`redis-benchmark -s SOCKET -c 50 -r 100000 -n N -P 16 incr post:__rand_int__`) to counterd writing to plain PostgreSQL (a schema, no cluster) and through PL/Proxy clusters (`COUNTERD_CLUSTER`) whose partitions are databases on the same server, one right after the other within each run (each run starting with a different setup), each cell a counterd of its own. "+
		"*committed/s* is the increments the stored totals grew by ÷ (load + final FLUSH); *÷ plain* compares it with plain PostgreSQL's in the same run. "+
		"*PostgreSQL µs* is the CPU of the whole PostgreSQL server (postmaster and children, background processes included) per increment committed and per slot row written; on a server shared with other clients their work counts too. "+
		"All partitions share the machine's cores with counterd and redis-benchmark, so on a small machine these figures show what partitioning costs, not what it scales to.\n\n")
	var body [][]string
	for _, x := range rows {
		label, run := PartitionsLabel(x.Partitions), strconv.Itoa(x.Run)
		if x.Missing {
			body = append(body, []string{label, run, "—", "—", "—", "—", "—", "—", "—", "—", "missing: " + x.Note})
			continue
		}
		body = append(body, []string{
			label, run, Thousands(int64(x.Rate)), drainCell(x), committedCell(&x), ratioCell(partitionsVsPlain(rows, x)), rowsCell(x),
			cpuCell(x, x.CPU.Server), perCell(x.PGMicrosPerCommitted()), perCell(x.PGMicrosPerSlotRow()), totalCell(x),
		})
	}
	table(b, []string{"setup", "run", "requests/s", "drain", "committed/s", "÷ plain", "rows/incr", "CPU µs/incr counterd",
		"PostgreSQL µs/committed incr", "PostgreSQL µs/slot row", "total"}, body)
	partitionsSummary(b, rows)
}

// partitionsVsPlain is x's committed rate ÷ plain PostgreSQL's in the
// same run, or -1.
func partitionsVsPlain(rows []Row, x Row) float64 {
	for _, y := range rows {
		if y.Partitions == 0 && y.Run == x.Run && !y.Missing {
			if p, c := y.CommittedRate(), x.CommittedRate(); p > 0 && c >= 0 {
				return c / p
			}
		}
	}
	return -1
}

func ratioCell(v float64) string {
	if v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}

// partitionsSummary writes, per setup, the median over runs (and the
// range) of the committed rate, its ratio to plain PostgreSQL's and
// PostgreSQL's CPU per increment committed and per slot row.
func partitionsSummary(b *bufio.Writer, rows []Row) {
	var setups []int
	for _, x := range rows {
		if !slices.Contains(setups, x.Partitions) {
			setups = append(setups, x.Partitions)
		}
	}
	slices.Sort(setups)
	num := func(f float64) string { return perCell(f) }
	var body [][]string
	for _, n := range setups {
		var committed, vs, perIncr, perRow, counterd []float64
		for _, x := range rows {
			if x.Partitions != n || x.Missing {
				continue
			}
			committed = appendKnown(committed, x.CommittedRate())
			vs = appendKnown(vs, partitionsVsPlain(rows, x))
			perIncr = appendKnown(perIncr, x.PGMicrosPerCommitted())
			perRow = appendKnown(perRow, x.PGMicrosPerSlotRow())
			counterd = appendKnown(counterd, x.MicrosPerIncr(x.CPU.Server))
		}
		body = append(body, []string{PartitionsLabel(n),
			spread(committed, func(f float64) string { return Thousands(int64(f)) }),
			spread(vs, func(f float64) string { return fmt.Sprintf("%.2f×", f) }),
			spread(perIncr, num), spread(perRow, num), spread(counterd, num)})
	}
	fmt.Fprintf(b, "Median over runs [lowest–highest]:\n\n")
	table(b, []string{"setup", "committed/s", "÷ plain", "PostgreSQL µs/committed incr", "PostgreSQL µs/slot row", "counterd µs/incr"}, body)
}

// appendKnown appends v unless it is negative (unknown).
func appendKnown(s []float64, v float64) []float64 {
	if v < 0 {
		return s
	}
	return append(s, v)
}
