package report

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// UniquesTarget is the uniques section's target: counterd's PFADD per
// second at least this share of its own INCR per second in the same run,
// and of redis-server's PFADD per second.
const UniquesTarget = 0.5

// Commands of the uniques section, as Row.Command names them; INCRONCE
// rows are named by OnceCommand.
const (
	CommandIncr  = "INCR"
	CommandPFAdd = "PFADD"
)

// OnceCommand names the INCRONCE row aiming at percent repeats.
func OnceCommand(percent float64) string {
	return fmt.Sprintf("INCRONCE, %g%% repeats", percent)
}

// WALPerIncr is WAL bytes per request, or -1.
func (r Row) WALPerIncr() float64 {
	if r.WALBytes <= 0 || r.Increments <= 0 {
		return -1
	}
	return float64(r.WALBytes) / float64(r.Increments)
}

// RowsPerRound is database rows written per committed round, or -1.
func (r Row) RowsPerRound() float64 {
	if r.RowsWritten < 0 || r.Rounds <= 0 {
		return -1
	}
	return float64(r.RowsWritten) / float64(r.Rounds)
}

// SettledRate is requests per second of load plus final FLUSH: for PFADD
// and INCRONCE the rate at which requests are decided in PostgreSQL, not
// just acknowledged. -1 for rows without a drain.
func (r Row) SettledRate() float64 {
	if r.Drain <= 0 || r.Elapsed <= 0 {
		return -1
	}
	return float64(r.Increments) / (r.Elapsed + r.Drain).Seconds()
}

func uniques(b *bufio.Writer, r *Report) {
	rows := section(r.Rows, Uniques)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Unique counts\n\n")
	fmt.Fprintf(b, "The real `redis-benchmark -s SOCKET -c 50 -P 16 -n N -r K` as in the ingest section, one right after the other within each run (each run starting with a different cell): `INCR` and `PFADD` to counterd, `PFADD` to redis-server keeping nothing and to redis-server with appendfsync everysec, then `INCRONCE` to counterd. "+
		"redis-benchmark replaces every `__rand_int__` with its own draw below K, so `PFADD u:__rand_int__ m__rand_int__` adds to K keys members drawn uniformly from K each: a key sees N/K adds, the first ones mostly new members and later ones more and more repeats. "+
		"`INCRONCE o:__rand_int__ v__rand_int__ 24h` draws visitors the same way, with K chosen so that the expected share of repeats (a visitor already counted for that key within the 24 h window) is the one named. Every cell has keys of its own. "+
		"*new* is, for `PFADD`, the distinct members the sketches hold afterwards, summed over the keys (`counter_uniques`, exact below postgresql-hll's explicit threshold of 1,280 members a key; redis-server's `PFCOUNT` an estimate); for `INCRONCE`, the views counted, which must equal the seen-set rows the cell left (*check*). "+
		"*CPU µs/request* is as in the ingest section; *WAL B/request* the WAL the whole PostgreSQL server wrote during the cell (`pg_current_wal_lsn()` before it and after the final FLUSH), per request, which counts anything else writing to that server too; *rows/round* the slot rows counterd wrote (for `PFADD` sketch rows of `counter_unique_slots`) per committed round; *decided/s* the requests per second of load plus final FLUSH.\n\n")
	var body [][]string
	for _, x := range rows {
		run := "—"
		if x.Run > 0 {
			run = strconv.Itoa(x.Run)
		}
		if x.Missing {
			body = append(body, []string{x.Command, serverLabel(x.Approach), run, x.Keys, "—", "—", "—", "—", "—", "—", "—", "—", "—", "—", "missing: " + x.Note})
			continue
		}
		body = append(body, []string{
			x.Command, serverLabel(x.Approach), run, x.Keys, Thousands(int64(x.Rate)), Duration(x.P99), newCell(x),
			cpuCell(x, x.CPU.Server), cpuCell(x, x.CPU.PG), cpuCell(x, x.CPU.PGServer), perCell(x.WALPerIncr()), perCell(x.RowsPerRound()),
			drainCell(x), rateOrDash(x.SettledRate()), uniquesCheck(x),
		})
	}
	table(b, []string{"command", "server", "run", "keys", "requests/s", "p99", "new", "CPU µs/request server", "PostgreSQL", "whole PostgreSQL",
		"WAL B/request", "rows/round", "drain", "decided/s", "check"}, body)
	uniquesTargets(b, rows)
}

// side is one cell of a uniques ratio: a command sent to a server.
type side struct{ command, server string }

// uniquesComparison is one ratio of the uniques section; target says
// whether UniquesTarget applies to it.
type uniquesComparison struct {
	num, den side
	target   bool
}

// uniquesComparisons are the ratios the section reports: the targets,
// then every INCRONCE cell against INCR.
func uniquesComparisons(rows []Row) []uniquesComparison {
	incr, pfadd := side{CommandIncr, Counterd}, side{CommandPFAdd, Counterd}
	out := []uniquesComparison{
		{pfadd, incr, true},
		{pfadd, side{CommandPFAdd, RedisPlain}, true},
		{pfadd, side{CommandPFAdd, RedisEverysec}, true},
	}
	var onces []string
	for _, x := range rows {
		if x.Approach == Counterd && x.Command != CommandIncr && x.Command != CommandPFAdd && !slices.Contains(onces, x.Command) {
			onces = append(onces, x.Command)
			out = append(out, uniquesComparison{side{x.Command, Counterd}, incr, false})
		}
	}
	return out
}

// ratios divides c's requests per second by its denominator's within
// each run both measured.
func (c uniquesComparison) ratios(rows []Row) []float64 {
	var v []float64
	for _, x := range rows {
		if x.Command != c.num.command || x.Approach != c.num.server || x.Missing {
			continue
		}
		if y := findCommand(rows, c.den.command, c.den.server, x.Run); y != nil && !y.Missing && y.Rate > 0 {
			v = append(v, x.Rate/y.Rate)
		}
	}
	return v
}

// uniquesTargets writes the ratios of requests per second within each run
// (median, and the range over runs) with the targets' verdicts, and what
// one PFADD cost PostgreSQL.
func uniquesTargets(b *bufio.Writer, rows []Row) {
	var body [][]string
	for _, c := range uniquesComparisons(rows) {
		v := c.ratios(rows)
		target, verdict := "—", "—"
		if c.target {
			target = fmt.Sprintf("≥ %.1f×", UniquesTarget)
			if len(v) > 0 {
				verdict = "not met"
				if median(v) >= UniquesTarget {
					verdict = "met"
				}
			}
		}
		body = append(body, []string{
			c.num.command + " " + serverLabel(c.num.server) + " ÷ " + c.den.command + " " + serverLabel(c.den.server),
			spread(v, func(f float64) string { return fmt.Sprintf("%.2f×", f) }), target, verdict,
		})
	}
	fmt.Fprintf(b, "Requests per second side by side, within each run: the median over runs, and in brackets the lowest and highest.\n\n")
	table(b, []string{"ratio", "median [range]", "target", "verdict"}, body)

	med := func(f func(Row) float64) string {
		var v []float64
		for _, x := range rows {
			if x.Command == CommandPFAdd && x.Approach == Counterd && !x.Missing {
				if y := f(x); y >= 0 {
					v = append(v, y)
				}
			}
		}
		if len(v) == 0 {
			return "—"
		}
		return perCell(median(v))
	}
	fmt.Fprintf(b, "Per counterd `PFADD` (median over runs): PostgreSQL CPU %s µs in counterd's backends (%s µs on the whole server), %s bytes of WAL, and %s sketch rows written per round.\n\n",
		med(func(x Row) float64 { return x.MicrosPerIncr(x.CPU.PG) }), med(func(x Row) float64 { return x.MicrosPerIncr(x.CPU.PGServer) }),
		med(Row.WALPerIncr), med(Row.RowsPerRound))
}

func findCommand(rows []Row, command, server string, run int) *Row {
	for i := range rows {
		if rows[i].Command == command && rows[i].Approach == server && rows[i].Run == run {
			return &rows[i]
		}
	}
	return nil
}

// newCell is the new members or counted views, and their share of the
// requests.
func newCell(r Row) string {
	if r.New < 0 || r.Increments <= 0 {
		return "—"
	}
	s := Thousands(r.New) + " (" + percent(r.New, r.Increments) + ")"
	if r.Approach != Counterd {
		s = "≈ " + s
	}
	return s
}

// uniquesCheck says whether a row's stored result adds up: INCR's total,
// INCRONCE's counted views against its seen-set rows.
func uniquesCheck(r Row) string {
	switch {
	case r.Command == CommandIncr:
		return totalCell(r)
	case r.SeenRows >= 0 && r.New >= 0:
		if r.New == r.SeenRows {
			return "counted = seen rows"
		}
		return fmt.Sprintf("counted %s ≠ %s seen rows", Thousands(r.New), Thousands(r.SeenRows))
	case r.Note != "":
		return r.Note
	}
	return "—"
}

// perCell formats a quantity per request or per round: three significant
// digits, whole numbers from 100 on.
func perCell(v float64) string {
	switch {
	case v < 0:
		return "—"
	case v >= 100:
		return Thousands(int64(math.Round(v)))
	}
	return fmt.Sprintf("%.3g", v)
}

func rateOrDash(v float64) string {
	if v < 0 {
		return "—"
	}
	return Thousands(int64(v))
}
