package report

import (
	"bufio"
	"fmt"
	"strconv"
)

// Peer is the ingest section's Redis-buffer-plus-worker pattern, as
// Row.Approach names it: redis-server with appendfsync everysec buffering
// HINCRBY counts KEY 1, and a worker process moving the buffer into
// PostgreSQL every second (package peer).
const Peer = "redis-worker"

// PeerTarget is the committed rate counterd aims at, as a multiple of the
// peer's at the same pipeline depth.
const PeerTarget = 1.5

// PeerWorkerLogFile is what the peer's worker printed.
const PeerWorkerLogFile = "peer-worker.log"

// peerRatios writes, per pipeline depth, counterd's committed rate over
// the peer's within each run against PeerTarget, and the CPU each spends
// per increment: counterd and its PostgreSQL backends against
// redis-server, the worker and the worker's backends.
func peerRatios(b *bufio.Writer, rows []Row) {
	var body [][]string
	for _, p := range pipelines(rows) {
		ratios, cpuRatios := peerPairs(rows, p)
		if len(ratios) == 0 && len(cpuRatios) == 0 {
			continue
		}
		verdict := "—"
		if len(ratios) > 0 {
			verdict = "not met"
			if median(ratios) >= PeerTarget {
				verdict = "met"
			}
		}
		committed := func(name string) string {
			return medianOf(rows, p, name, func(x Row) float64 { return x.CommittedRate() }, func(f float64) string { return Thousands(int64(f)) })
		}
		us := func(name string, pick func(Row) float64) string {
			return medianOf(rows, p, name, pick, func(f float64) string { return fmt.Sprintf("%.3g", f) })
		}
		share := func(pick func(CPU) Share) func(Row) float64 {
			return func(x Row) float64 { return x.MicrosPerIncr(pick(x.CPU)) }
		}
		body = append(body, []string{
			strconv.Itoa(p),
			spread(ratios, func(f float64) string { return fmt.Sprintf("%.2f×", f) }), verdict,
			committed(Counterd), committed(Peer),
			us(Counterd, share(func(c CPU) Share { return c.Server })), us(Counterd, share(func(c CPU) Share { return c.PG })),
			us(Peer, share(func(c CPU) Share { return c.Server })), us(Peer, share(func(c CPU) Share { return c.Worker })), us(Peer, share(func(c CPU) Share { return c.PG })),
			spread(cpuRatios, func(f float64) string { return fmt.Sprintf("%.2g×", f) }),
		})
	}
	if len(body) == 0 {
		return
	}
	fmt.Fprintf(b, "Against the Redis-buffer-plus-worker pattern (%s: redis-server with appendfsync everysec buffering `HINCRBY counts KEY 1`, a worker process moving the buffer into PostgreSQL every second with `RENAME`, `HGETALL`, one `INSERT … SELECT unnest … ON CONFLICT`, `DEL`, and at once after the load: its drain), committed rates within each run: the median over runs, and in brackets the lowest and highest. Target: counterd ≥ %.1f× the pattern.\n\n", serverLabel(Peer), PeerTarget)
	table(b, []string{"pipeline", "committed: counterd ÷ pattern", "target", "committed/s counterd", "pattern",
		"CPU µs/INCR counterd", "+ its PostgreSQL", "pattern: redis-server", "+ worker", "+ its PostgreSQL", "CPU: counterd + PostgreSQL ÷ pattern's"}, body)
}

// peerPairs returns, for every run at pipeline p with both counterd and
// the peer measured, counterd's committed rate over the peer's and its
// CPU per increment over the peer's.
func peerPairs(rows []Row, p int) (ratios, cpuRatios []float64) {
	for _, x := range rows {
		if x.Pipeline != p || x.Approach != Counterd || x.Missing {
			continue
		}
		y := findRun(rows, Peer, p, x.Run)
		if y == nil || y.Missing {
			continue
		}
		if c, q := x.CommittedRate(), y.CommittedRate(); c >= 0 && q > 0 {
			ratios = append(ratios, c/q)
		}
		if c, q := counterdCPU(x), peerCPU(*y); c >= 0 && q > 0 {
			cpuRatios = append(cpuRatios, c/q)
		}
	}
	return ratios, cpuRatios
}

// counterdCPU is counterd's and its backends' CPU µs per increment, or -1.
func counterdCPU(x Row) float64 {
	c, pg := x.MicrosPerIncr(x.CPU.Server), x.MicrosPerIncr(x.CPU.PG)
	if c < 0 || pg < 0 {
		return -1
	}
	return c + pg
}

// peerCPU is redis-server's, the worker's and the worker's backends' CPU
// µs per increment, or -1.
func peerCPU(x Row) float64 {
	r, w, pg := x.MicrosPerIncr(x.CPU.Server), x.MicrosPerIncr(x.CPU.Worker), x.MicrosPerIncr(x.CPU.PG)
	if r < 0 || w < 0 || pg < 0 {
		return -1
	}
	return r + w + pg
}

// medianOf formats the median of pick over the rows of name at pipeline
// p that have a value.
func medianOf(rows []Row, p int, name string, pick func(Row) float64, f func(float64) string) string {
	var v []float64
	for _, x := range rows {
		if x.Pipeline == p && x.Approach == name && !x.Missing {
			if got := pick(x); got >= 0 {
				v = append(v, got)
			}
		}
	}
	return spread(v, f)
}
