package report

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"time"
)

// Columns are bench.csv's header. Rates are per second, latencies in
// microseconds; a column that does not apply to a row is empty.
// drain_seconds and committed_rate are for counterd and peer rows; the pending,
// keeps_up, write and rounds columns for sustain rows; run numbers the
// repetitions of ingest and uniques cells; command, new, seen_rows,
// wal_bytes_per_incr and rows_per_round are for uniques rows (see Row),
// and rounds for them too; partitions and
// pg_server_cpu_us_per_committed (the whole PostgreSQL server's CPU per
// increment committed) for partitions rows; daemons, transactions (see
// Row), daemon_cpu_us_per_own_incr (every daemon's, separated by
// spaces), the staleness columns (see Staleness) and wal_bytes_per_incr
// for fleet rows; new, members and committed_rate (see
// Row.SetsCommittedRate) for sets rows. The cpu columns are CPU microseconds per
// increment (see CPU): the server measured, counterd's (or the peer's
// worker's) PostgreSQL backends, the whole PostgreSQL server, and the
// peer's worker process.
var Columns = []string{
	"section", "approach", "command", "keys", "clients", "pipeline", "run", "seconds",
	"increments", "errors", "incr_per_s", "offered_per_s", "p50_us", "p99_us", "p999_us", "max_us",
	"stored", "exact", "diff", "estimate_bound95",
	"rows_written", "rows_per_incr", "rows_per_s",
	"drain_seconds", "committed_rate",
	"pending_max_first_half", "pending_max_second_half", "keeps_up", "write_rows_per_s", "rounds",
	"server_cpu_us_per_incr", "pg_cpu_us_per_incr", "pg_server_cpu_us_per_incr",
	"new", "seen_rows", "wal_bytes_per_incr", "rows_per_round",
	"partitions", "pg_server_cpu_us_per_committed",
	"worker_cpu_us_per_incr", "client_cpu_us_per_incr",
	"daemons", "transactions", "transactions_per_100k", "daemon_cpu_us_per_own_incr",
	"probes", "staleness_p50_ms", "staleness_p99_ms", "staleness_max_ms",
	"members",
	"missing", "note",
}

// WriteCSV writes the header and one record per row.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Columns); err != nil {
		return err
	}
	for _, r := range rows {
		if err := cw.Write(record(r)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func record(r Row) []string {
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	f := func(x float64, prec int) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	us := func(d int64) string { return f(float64(d)/1e3, 1) }
	v := map[string]string{
		"section": r.Section, "approach": r.Approach, "command": r.Command, "keys": r.Keys,
		"clients": strconv.Itoa(r.Clients), "pipeline": strconv.Itoa(r.Pipeline),
		"missing": strconv.FormatBool(r.Missing), "note": r.Note,
	}
	if r.Run > 0 {
		v["run"] = strconv.Itoa(r.Run)
	}
	if !r.Missing {
		v["seconds"] = f(r.Elapsed.Seconds(), 3)
		v["increments"], v["errors"], v["incr_per_s"] = i(r.Increments), i(r.Errors), f(r.Rate, 1)
		if r.Offered > 0 {
			v["offered_per_s"] = f(r.Offered, 1)
		}
		v["p50_us"], v["p99_us"] = us(int64(r.P50)), us(int64(r.P99))
		if r.Max > 0 {
			v["p999_us"], v["max_us"] = us(int64(r.P999)), us(int64(r.Max))
		}
		if r.Checked {
			v["stored"], v["exact"], v["diff"] = i(r.Stored), strconv.FormatBool(r.Exact()), i(r.Diff())
			if r.Estimate {
				v["estimate_bound95"] = i(r.Bound95)
			}
		}
		if r.RowsWritten >= 0 {
			v["rows_written"], v["rows_per_incr"], v["rows_per_s"] = i(r.RowsWritten), f(r.RowsPerIncrement(), 6), f(r.RowRate(), 1)
		}
		if r.Drain > 0 {
			v["drain_seconds"] = f(r.Drain.Seconds(), 4)
		}
		if c := r.CommittedRate(); c >= 0 {
			v["committed_rate"] = f(c, 1)
		}
		if first, second, ok := r.PendingMax(); ok {
			v["pending_max_first_half"], v["pending_max_second_half"] = f(first, 0), f(second, 0)
			v["keeps_up"] = strconv.FormatBool(r.KeepsUp())
		}
		if r.WriteRate > 0 {
			v["write_rows_per_s"] = f(r.WriteRate, 1)
		}
		if r.Section == Sustain || r.Rounds > 0 {
			v["rounds"] = i(r.Rounds)
		}
		if r.Section == Uniques {
			uniquesRecord(r, v)
		}
		if r.Section == Partitions {
			v["partitions"] = strconv.Itoa(r.Partitions)
			if us := r.PGMicrosPerCommitted(); us >= 0 {
				v["pg_server_cpu_us_per_committed"] = f(us, 3)
			}
		}
		if r.Section == Fleet {
			fleetRecord(r, v)
		}
		if r.Section == Sets {
			setsRecord(r, v)
		}
		for col, share := range map[string]Share{
			"server_cpu_us_per_incr": r.CPU.Server, "pg_cpu_us_per_incr": r.CPU.PG, "pg_server_cpu_us_per_incr": r.CPU.PGServer,
			"worker_cpu_us_per_incr": r.CPU.Worker, "client_cpu_us_per_incr": r.CPU.Client,
		} {
			if us := r.MicrosPerIncr(share); us >= 0 {
				v[col] = f(us, 3)
			}
		}
	}
	rec := make([]string, len(Columns))
	for n, c := range Columns {
		rec[n] = v[c]
	}
	return rec
}

// uniquesRecord fills the columns only uniques rows have.
func uniquesRecord(r Row, v map[string]string) {
	if r.New >= 0 {
		v["new"] = strconv.FormatInt(r.New, 10)
	}
	if r.SeenRows >= 0 {
		v["seen_rows"] = strconv.FormatInt(r.SeenRows, 10)
	}
	if w := r.WALPerIncr(); w >= 0 {
		v["wal_bytes_per_incr"] = strconv.FormatFloat(w, 'f', 2, 64)
	}
	if p := r.RowsPerRound(); p >= 0 {
		v["rows_per_round"] = strconv.FormatFloat(p, 'f', 1, 64)
	}
}

// fleetRecord fills the columns only fleet rows have.
func fleetRecord(r Row, v map[string]string) {
	f := func(x float64, prec int) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	ms := func(d time.Duration) string { return f(float64(d)/float64(time.Millisecond), 1) }
	v["daemons"] = strconv.Itoa(r.Daemons)
	if r.Transactions >= 0 {
		v["transactions"], v["transactions_per_100k"] = strconv.FormatInt(r.Transactions, 10), f(r.TransactionsPer100k(), 2)
	}
	if w := r.WALPerIncr(); w >= 0 {
		v["wal_bytes_per_incr"] = f(w, 2)
	}
	var each []string
	for _, us := range r.DaemonMicrosPerOwnIncr() {
		each = append(each, f(us, 3))
	}
	v["daemon_cpu_us_per_own_incr"] = strings.Join(each, " ")
	v["probes"] = strconv.Itoa(r.Staleness.Probes)
	if r.Staleness.Probes > 0 {
		v["staleness_p50_ms"], v["staleness_p99_ms"], v["staleness_max_ms"] = ms(r.Staleness.P50), ms(r.Staleness.P99), ms(r.Staleness.Max)
	}
}
