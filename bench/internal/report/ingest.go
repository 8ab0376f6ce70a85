package report

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Servers of the ingest section, as Row.Approach names them.
const (
	Counterd = "counterd"
	// RedisPlain is redis-server keeping nothing durable.
	RedisPlain = "redis-server"
	// RedisEverysec is redis-server with appendonly yes and appendfsync
	// everysec: the durable reference counterd's journal is compared with.
	RedisEverysec = "redis-server-everysec"
)

// The latency target: p99 of an unpipelined INCR below LatencyTargetP99
// at LatencyTargetRate offered by LatencyTargetClients clients.
const (
	LatencyTargetRate    = 50000
	LatencyTargetClients = 50
	LatencyTargetP99     = time.Millisecond
)

func serverLabel(name string) string {
	switch name {
	case RedisPlain:
		return "redis-server (no persistence)"
	case RedisEverysec:
		return "redis-server (appendfsync everysec)"
	case Peer:
		return "redis-server everysec + worker → PostgreSQL"
	case AppLikes:
		return "app pattern (likes + like_count)"
	}
	return name
}

func ingest(b *bufio.Writer, r *Report) {
	rows := section(r.Rows, Ingest)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Ingest: redis-benchmark\n\n")
	fmt.Fprintf(b, "The real `redis-benchmark -s SOCKET -c 50 -r 100000 -n N -P P incr post:__rand_int__` against counterd (journal on, its defaults), redis-server with `appendonly yes`, `appendfsync everysec` (the durable reference) and redis-server keeping nothing, and `hincrby counts post:__rand_int__ 1` against the Redis-buffer-plus-worker pattern (%s), one right after the other within each run (each run starting with a different server), so every ratio compares cells measured under much the same load. counterd is then FLUSHed, the pattern's worker told to move its buffer at once (its drain), and the stored total compared with N; *committed/s* counts that drain's time too. "+
		"*CPU µs/INCR* is CPU time (utime+stime from /proc/PID/stat, all threads) read before and after the cell, divided by N: *server* is counterd's or redis-server's own; *worker* the pattern's worker process; *PostgreSQL* the backends serving counterd's or the worker's connections (found by their application_name in pg_stat_activity), including the drain's writes; *whole PostgreSQL* every process of the server's postmaster (from postmaster.pid in its data directory), which also counts anything else using that server; *redis-benchmark* the load generator's own, from the kernel when it exited: the same work whichever server it loads, taken from the cores they share, so on a small machine it narrows every ratio. *rows/INCR* is rows counterd or the worker wrote per increment.\n\n", serverLabel(Peer))
	var body [][]string
	for _, x := range rows {
		run := "—"
		if x.Run > 0 {
			run = strconv.Itoa(x.Run)
		}
		if x.Missing {
			body = append(body, []string{serverLabel(x.Approach), strconv.Itoa(x.Pipeline), run, "—", "—", "—", "missing: " + x.Note, "—", "—", "—", "—", "—", "—", "—"})
			continue
		}
		body = append(body, []string{
			serverLabel(x.Approach), strconv.Itoa(x.Pipeline), run, Thousands(int64(x.Rate)), Duration(x.P50), Duration(x.P99), totalCell(x),
			cpuCell(x, x.CPU.Server), cpuCell(x, x.CPU.Worker), cpuCell(x, x.CPU.PG), cpuCell(x, x.CPU.PGServer), cpuCell(x, x.CPU.Client), rowsCell(x), committedCell(&x),
		})
	}
	table(b, []string{"server", "pipeline", "run", "requests/s", "p50", "p99", "total", "CPU µs/INCR server", "worker", "PostgreSQL", "whole PostgreSQL", "redis-benchmark", "rows/INCR", "committed/s"}, body)
	ingestRatios(b, rows)
	peerRatios(b, rows)
}

// pipelines lists the pipeline depths of rows, deepest first.
func pipelines(rows []Row) []int {
	var pipes []int
	for _, x := range rows {
		if !slices.Contains(pipes, x.Pipeline) {
			pipes = append(pipes, x.Pipeline)
		}
	}
	slices.SortFunc(pipes, func(a, b int) int { return b - a })
	return pipes
}

// ingestRatios writes, per pipeline depth, the ratios of requests per
// second within each run (median, and the range over runs) and the
// median CPU per increment of each server.
func ingestRatios(b *bufio.Writer, rows []Row) {
	var body [][]string
	for _, p := range pipelines(rows) {
		ratio := func(num, den string) ([]float64, string) {
			var v []float64
			for _, x := range rows {
				if x.Pipeline != p || x.Approach != num || x.Missing {
					continue
				}
				if y := findRun(rows, den, p, x.Run); y != nil && !y.Missing && y.Rate > 0 {
					v = append(v, x.Rate/y.Rate)
				}
			}
			return v, spread(v, func(f float64) string { return fmt.Sprintf("%.2f×", f) })
		}
		// CPU per INCR of counterd and its PostgreSQL backends over
		// redis-server everysec's, within each run.
		var cpuRatio []float64
		for _, x := range rows {
			if x.Pipeline != p || x.Approach != Counterd || x.Missing {
				continue
			}
			y := findRun(rows, RedisEverysec, p, x.Run)
			c, pg := x.MicrosPerIncr(x.CPU.Server), x.MicrosPerIncr(x.CPU.PG)
			if y != nil && !y.Missing && c >= 0 && pg >= 0 {
				if r := y.MicrosPerIncr(y.CPU.Server); r > 0 {
					cpuRatio = append(cpuRatio, (c+pg)/r)
				}
			}
		}
		ce, ceCell := ratio(Counterd, RedisEverysec)
		_, cnCell := ratio(Counterd, RedisPlain)
		_, enCell := ratio(RedisEverysec, RedisPlain)
		verdict := "—"
		if len(ce) > 0 {
			verdict = "not met"
			if median(ce) >= 1 {
				verdict = "met"
			}
		}
		cpu := func(name string, pick func(CPU) Share) string {
			var v []float64
			for _, x := range rows {
				if x.Pipeline == p && x.Approach == name && !x.Missing {
					if us := x.MicrosPerIncr(pick(x.CPU)); us >= 0 {
						v = append(v, us)
					}
				}
			}
			return spread(v, func(f float64) string { return fmt.Sprintf("%.3g", f) })
		}
		server := func(c CPU) Share { return c.Server }
		body = append(body, []string{
			strconv.Itoa(p), ceCell, verdict, cnCell, enCell,
			cpu(Counterd, server), cpu(Counterd, func(c CPU) Share { return c.PG }), cpu(RedisEverysec, server), cpu(RedisPlain, server),
			spread(cpuRatio, func(f float64) string { return fmt.Sprintf("%.2g×", f) }),
		})
	}
	fmt.Fprintf(b, "Side by side, within each run: the median over runs, and in brackets the lowest and highest. Target: counterd ≥ 1.0× redis-server with appendfsync everysec.\n\n")
	table(b, []string{"pipeline", "counterd ÷ redis everysec", "target", "counterd ÷ redis no persistence", "redis everysec ÷ no persistence",
		"CPU µs/INCR counterd", "+ its PostgreSQL", "redis everysec", "redis no persistence", "CPU: counterd + PostgreSQL ÷ redis everysec"}, body)
}

// latencyTarget says, under the latency table, whether counterd met the
// p99 target in a cell at the target's rate and clients.
func latencyTarget(b *bufio.Writer, rows []Row) {
	for _, x := range rows {
		if x.Approach != Counterd || x.Missing || x.Offered != LatencyTargetRate || x.Clients != LatencyTargetClients {
			continue
		}
		verdict := "not met"
		if x.P99 < LatencyTargetP99 && x.Errors == 0 {
			verdict = "met"
		}
		fmt.Fprintf(b, "Target p99 < %s at %s/s from %d unpipelined clients: counterd p99 %s (achieved %s/s): **%s**.\n\n",
			Duration(LatencyTargetP99), Thousands(LatencyTargetRate), LatencyTargetClients, Duration(x.P99), Thousands(int64(x.Rate)), verdict)
	}
}

func findRun(rows []Row, approach string, pipeline, run int) *Row {
	for i := range rows {
		if rows[i].Approach == approach && rows[i].Pipeline == pipeline && rows[i].Run == run {
			return &rows[i]
		}
	}
	return nil
}

func cpuCell(r Row, s Share) string {
	if us := r.MicrosPerIncr(s); us >= 0 {
		return fmt.Sprintf("%.3g", us)
	}
	return "—"
}

// spread formats the median of v, with [lowest–highest] when there are
// several.
func spread(v []float64, f func(float64) string) string {
	switch len(v) {
	case 0:
		return "—"
	case 1:
		return f(v[0])
	}
	return fmt.Sprintf("%s [%s–%s]", f(median(v)), f(slices.Min(v)), f(slices.Max(v)))
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
