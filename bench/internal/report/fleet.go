package report

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Fleet cells are N counterd daemons on one PostgreSQL sharing one load,
// and the peer under the same load, with PostgreSQL's work per increment.
const Fleet = "fleet"

// Fleet's files beside the report.
const (
	// FleetChartFile is PostgreSQL's CPU per increment against the
	// number of daemons.
	FleetChartFile = "fleet.png"
	// FleetLogFile is what the fleet section's daemons printed.
	FleetLogFile = "counterd-fleet.log"
)

// Staleness is how long after its acknowledgement an increment showed in
// SQL: probes sent during the load, each seen once a poll of
// counter_totals (for the peer, its table) returned it.
type Staleness struct {
	Probes        int
	P50, P99, Max time.Duration
}

// StalenessOf summarises the probes' delays; the zero Staleness for none.
func StalenessOf(delays []time.Duration) Staleness {
	if len(delays) == 0 {
		return Staleness{}
	}
	s := slices.Clone(delays)
	slices.Sort(s)
	// Nearest rank: the smallest delay at least q of the probes reach.
	rank := func(q float64) time.Duration {
		i := int(float64(len(s))*q+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Staleness{Probes: len(s), P50: rank(0.5), P99: rank(0.99), Max: s[len(s)-1]}
}

// TransactionsPer100k is transactions per 100,000 increments, or -1.
func (r Row) TransactionsPer100k() float64 {
	if r.Transactions < 0 || r.Increments <= 0 {
		return -1
	}
	return float64(r.Transactions) * 1e5 / float64(r.Increments)
}

// SidecarMicrosPerIncr is the CPU of what sits between the clients and
// PostgreSQL, per increment: every daemon's, or for the peer
// redis-server's and the worker's; -1 when unknown.
func (r Row) SidecarMicrosPerIncr() float64 {
	s := r.MicrosPerIncr(r.CPU.Server)
	if s < 0 || r.Approach != Peer {
		return s
	}
	w := r.MicrosPerIncr(r.CPU.Worker)
	if w < 0 {
		return -1
	}
	return s + w
}

// DaemonMicrosPerOwnIncr is each daemon's CPU per increment of its own
// share of the load (the increments over the daemons).
func (r Row) DaemonMicrosPerOwnIncr() []float64 {
	if r.Daemons <= 0 || r.Increments <= 0 {
		return nil
	}
	share := float64(r.Increments) / float64(r.Daemons)
	out := make([]float64, len(r.DaemonCPU))
	for i, t := range r.DaemonCPU {
		out[i] = float64(t) / float64(time.Microsecond) / share
	}
	return out
}

// FleetLabel names a fleet row's setup.
func FleetLabel(r Row) string {
	if r.Approach == Peer {
		return "Redis buffer + 1 s worker"
	}
	return "counterd ×" + strconv.Itoa(r.Daemons)
}

func fleet(b *bufio.Writer, r *Report) {
	rows := section(r.Rows, Fleet)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Fleet: N sidecars on one PostgreSQL\n\n")
	load := "one `redis-benchmark -s SOCKET -c max(1, 50/N) -r K -n TOTAL/N -P P incr post:__rand_int__` per daemon, all at once"
	if rows[0].Offered > 0 {
		load = fmt.Sprintf("paced at %s increments a second in all by counterbench's own load generator: TOTAL/N uniformly drawn `INCR post:N` (N < K) per daemon at %s/N a second over max(1, 50/N) connections, P a round trip, all at once; the peer's `HINCRBY`s paced at the same rate", Thousands(int64(rows[0].Offered)), Thousands(int64(rows[0].Offered)))
	}
	fmt.Fprintf(b, "N counterd daemons, each with its own socket and journal, write into one schema; the same increments are split over them: %s. ", load)
	fmt.Fprintf(b, "The peer (%s: redis-server with appendfsync everysec buffering `HINCRBY counts KEY 1`, one worker upserting the buffer every second) gets the whole load from 50 connections: it is one central buffer whatever the number of app servers, so N does not apply to it. "+
		"Each cell starts its processes afresh and lets PostgreSQL's statistics settle before it starts, and ends once everything acknowledged is committed (FLUSH on every daemon; the worker's drain). "+
		"Per increment: *rows* written (`pg_stat_user_tables` inserts + updates + deletes over the run's schema, read once the daemons or the worker have exited, so their shutdown's few rows count), *transactions* (`pg_stat_database` commits + rollbacks of the database, less the benchmark's own queries; anything else using the database counts too), "+
		"*WAL* (`pg_current_wal_lsn()`, the whole server), *PostgreSQL CPU* (every process of the server), the *sidecars'* CPU (all daemons; for the peer redis-server and the worker) and each daemon's per increment of its own share. "+
		"*Staleness*: during the load a prober sends, in turn to each daemon, an `INCR` of a key of its own, 20 a second in all, and a poll of `counter_totals(keys)` every 50 ms records when each first shows (for the peer, `HINCRBY` into the buffer and a poll of the worker's table); the delay from acknowledgement to showing, p50 / p99 / max over the probes.\n\n", serverLabel(Peer))
	var keys []string
	for _, x := range rows {
		if !slices.Contains(keys, x.Keys) {
			keys = append(keys, x.Keys)
		}
	}
	for _, k := range keys {
		fmt.Fprintf(b, "### %s keys\n\n", k)
		var body [][]string
		for _, x := range rows {
			if x.Keys != k {
				continue
			}
			label, p := FleetLabel(x), strconv.Itoa(x.Pipeline)
			if x.Missing {
				body = append(body, []string{label, p, "—", "—", "—", "—", "—", "—", "—", "—", "—", "—", "—", "missing: " + x.Note})
				continue
			}
			body = append(body, []string{
				label, p, strconv.Itoa(x.Clients), Thousands(int64(x.Rate)), drainCell(x), rowsCell(x),
				perCell(x.TransactionsPer100k()), perCell(x.WALPerIncr()), cpuCell(x, x.CPU.PGServer),
				perCell(x.SidecarMicrosPerIncr()), daemonsCell(x), stalenessCell(x.Staleness), totalCell(x),
			})
		}
		table(b, []string{"setup", "pipeline", "clients", "incr/s", "drain", "rows/incr", "transactions per 100k", "WAL B/incr",
			"PostgreSQL CPU µs/incr", "sidecar CPU µs/incr", "per daemon µs/own incr", "staleness p50 / p99 / max (probes)", "total"}, body)
	}
	fmt.Fprintf(b, "![PostgreSQL CPU per increment against daemons](%s)\n\n", FleetChartFile)
}

// daemonsCell is the lowest and highest of the daemons' CPU per
// increment of their own share.
func daemonsCell(x Row) string {
	v := x.DaemonMicrosPerOwnIncr()
	switch len(v) {
	case 0:
		return "—"
	case 1:
		return perCell(v[0])
	}
	return perCell(slices.Min(v)) + "–" + perCell(slices.Max(v))
}

func stalenessCell(s Staleness) string {
	if s.Probes == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s / %s (%d)", Duration(s.P50), Duration(s.P99), Duration(s.Max), s.Probes)
}
