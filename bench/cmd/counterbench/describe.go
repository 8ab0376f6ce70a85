package main

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/counterd/counterd/bench/internal/pattern"
	"github.com/counterd/counterd/bench/internal/peer"
	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/config"
)

// command is the shell command that reproduces the run: make bench with
// every COUNTERBENCH_ variable whose value differs from its default, and
// every COUNTERD_ variable that reaches counterd.
func (b *bench) command() string {
	// run has loaded b.environ already; were it to fail here, every
	// variable would count as set, which still reproduces the run.
	set, _ := config.Load[settings](b.environ)
	defaults, _ := config.Load[settings]([]string{"DATABASE_URL=x"})
	var vars []string
	for _, kv := range b.environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "COUNTERBENCH_"):
			if !differs(set, defaults, k) {
				continue
			}
		case strings.HasPrefix(k, "COUNTERD_"):
			if slices.Contains(counterdOwn, k) {
				continue // the run sets it
			}
		default:
			continue
		}
		vars = append(vars, k+"="+shellQuote(v))
	}
	slices.Sort(vars)
	return strings.Join(append(vars, "make bench"), " ")
}

// differs reports whether the setting read from variable name has another
// value in a than in b, once both are validated (so "8,1" equals "1,8").
// A variable counterbench does not read changes nothing.
func differs(a, b settings, name string) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	t := va.Type()
	for i := range t.NumField() {
		if env, _, _ := strings.Cut(t.Field(i).Tag.Get("env"), ","); env == name {
			return !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface())
		}
	}
	return false
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789,._-/:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// describePostgres names the server's version and the settings that
// decide write throughput.
func (b *bench) describePostgres(ctx context.Context) string {
	var version, fsync, syncCommit, buffers, maxConns string
	err := b.pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
current_setting('synchronous_commit'), current_setting('shared_buffers'), current_setting('max_connections')`).
		Scan(&version, &fsync, &syncCommit, &buffers, &maxConns)
	if err != nil {
		return "unknown: " + oneLine(err.Error())
	}
	return fmt.Sprintf("%s (fsync %s, synchronous_commit %s, shared_buffers %s, max_connections %s)", version, fsync, syncCommit, buffers, maxConns)
}

// describeRedis names redis-server's version, or why there is none.
func (b *bench) describeRedis(ctx context.Context) string {
	path, err := process.Lookup(b.cfg.RedisServer, "redis-server")
	if err != nil {
		return "not installed: " + err.Error()
	}
	out, err := process.Output(ctx, path, "--version")
	if err != nil {
		return "unknown: " + oneLine(err.Error())
	}
	v := strings.TrimSpace(string(out))
	for _, f := range strings.Fields(v) {
		if after, ok := strings.CutPrefix(f, "v="); ok {
			v = after
		}
	}
	if _, err := process.Lookup(b.cfg.RedisBenchmark, "redis-benchmark"); err != nil {
		v += "; redis-benchmark not installed"
	}
	return v
}

func (b *bench) describeSettings() [][2]string {
	c := b.cfg
	clients := make([]string, len(c.Clients))
	for i, n := range c.Clients {
		clients[i] = strconv.Itoa(n)
	}
	keys := make([]string, len(c.Keys))
	for i, d := range c.dists() {
		keys[i] = d.String() + " (" + d.Describe(c.Keyspace) + ")"
	}
	s := [][2]string{
		{"duration per cell", c.Duration.String()},
		{"clients", strings.Join(clients, ", ")},
		{"keys", strings.Join(keys, "; ") + "; key names " + keyspace.Prefix + "N"},
		{"SQL approaches", fmt.Sprintf("one table each in schema %s, fillfactor 70; single-row tables hold every key; slotted tables %d slots; probabilistic N = %d; pgx, one connection per client", c.Schema, pattern.Slots, pattern.SampleN)},
		{"counterd", "started by the run with its defaults (journal on, fsync everysec, no sampling, so totals can be checked) and any other COUNTERD_* set in the environment"},
		{"redis-server", "started by the run: Unix socket only, --save '' --appendonly no"},
	}
	if c.runs("ceiling") {
		s = append(s, [2]string{"ceiling", fmt.Sprintf("up to %d distinct keys per statement", c.CeilingBatch)})
	}
	if c.runs("ingest") {
		s = append(s, [2]string{"ingest", fmt.Sprintf("redis-benchmark -c 50 -r 100000 -n %d -P 16 and -P 1, %d runs of counterd, the Redis-buffer-plus-worker pattern (hincrby %s post:__rand_int__ 1 to redis-server everysec; a worker process moves the buffer into table %s every second and at once after the load), redis-server --appendonly yes --appendfsync everysec and redis-server keeping nothing, interleaved", c.IngestRequests, c.IngestRuns, peer.Hash, peer.Table)})
		if len(b.latencyTargetCells()) > 0 {
			s = append(s, [2]string{"latency target", fmt.Sprintf("%d unpipelined clients offering %s INCR/s for %v, uniform keys, to counterd and to redis-server with appendfsync everysec", report.LatencyTargetClients, report.Thousands(report.LatencyTargetRate), c.Duration)})
		}
	}
	if c.runs("latency") {
		s = append(s, [2]string{"latency", fmt.Sprintf("%d unpipelined clients offering %s INCR/s in total for %v each, uniform keys, to counterd, redis-server with appendfsync everysec and redis-server keeping nothing; p50, p99, p99.9 and the longest latency (under a paced load, the longest is at least the longest time the server answered no one)", c.LatencyClients, rateList(c.LatencyRates), c.Duration)})
	}
	if c.runs("sustain") {
		s = append(s, [2]string{"sustain", fmt.Sprintf("%d clients, %d INCR per round trip, offering %.0f INCR/s in total for %v, %s keys; counterd's /metrics read every %v",
			sustainClients, sustainPipeline, c.SustainRate, c.SustainDuration, sustainKeys, sampleEvery)})
	}
	if c.runs("ingest") || c.runs("uniques") || c.runs("sets") {
		pg := "PostgreSQL: the backends with counterd's (or the peer's worker's) application_name in pg_stat_activity; whole PostgreSQL: "
		if b.postmaster != 0 {
			pg += fmt.Sprintf("postmaster pid %d and its children (the server is not the run's own: other clients' work counts too)", b.postmaster)
		} else {
			pg += "not measured, " + b.postmasterWhy
		}
		s = append(s, [2]string{"CPU per request", "utime+stime from /proc/PID/stat before and after each ingest, uniques and sets cell (after counterd's final FLUSH or the peer's drain), divided by the requests; the peer's worker is a process of its own; " + pg})
	}
	if c.runs("uniques") {
		s = append(s, [2]string{"uniques", fmt.Sprintf("redis-benchmark -c %d -P 16, %d runs, interleaved: INCR and PFADD with -n %d -r %d to counterd, PFADD to redis-server keeping nothing and with appendfsync everysec; INCRONCE (window %s) with -n %d aiming at %s%% repeats",
			ingestClients, c.UniquesRuns, c.UniquesRequests, c.UniquesKeys, onceWindow, c.OnceRequests, percentList(c.OnceRepeats))})
	}
	if c.runs("partitions") {
		s = append(s, [2]string{"partitions", fmt.Sprintf("redis-benchmark -c %d -r %d -n %d -P 16, %d runs, interleaved: counterd on plain PostgreSQL (schema %s_plain) and on PL/Proxy clusters of %s partitions (%s --fresh: databases %s_N_proxy, %s_N_p0 ... on the same server); CPU of the whole PostgreSQL server (postmaster and children) per increment committed",
			ingestClients, ingestKeys, c.PartitionRequests, c.PartitionRuns, c.Schema, intList(c.Partitions), c.ClusterScript, c.Schema, c.Schema)})
	}
	if c.runs("fleet") {
		load := "one redis-benchmark a daemon"
		if c.FleetRate > 0 {
			load = fmt.Sprintf("paced at %s a second in all by counterbench's load generator", report.Thousands(int64(c.FleetRate)))
		}
		s = append(s, [2]string{"fleet", fmt.Sprintf("in a database of its own on the same server (%s, dropped and recreated), %s counterd daemons (COUNTERD_DB_MAX_CONNS=%d each, logs in %s) sharing %s increments and %d clients (%s, -c max(1, %d/N)), -r %s, -P 1 and -P 16, and the Redis-buffer-plus-worker pattern under the same load; every cell starts its processes afresh and waits %v before reading PostgreSQL's statistics",
			fleetDatabase(c.Schema), intList(c.FleetSizes), b.fleetDBConns(), report.FleetLogFile, report.Thousands(int64(c.FleetRequests)), ingestClients, load, ingestClients, intList(c.FleetKeys), c.FleetSettle)})
	}
	if c.runs("sets") {
		s = append(s, [2]string{"sets", fmt.Sprintf("%d clients of counterbench's own, %d runs, interleaved, each cell %v or %s requests: SADD of new user ids and then of the same ids again, and INCR, to %d keys (post:N:likes behind a prefix of each group's own, e.g. s1b:post:7:likes; user u to post u mod %d) at -P 16 and -P 1, to counterd and (SADD) to redis-server with appendfsync everysec; the application's own pattern through pgx (%d connections): tables likes (post_id, user_id, primary key both) and posts (id, like_count), one transaction a like, INSERT ... ON CONFLICT DO NOTHING and, when it inserted, UPDATE posts SET like_count = like_count + 1",
			c.SetsClients, c.SetsRuns, c.Duration, report.Thousands(int64(c.SetsRequests)), c.SetsPosts, c.SetsPosts, c.SetsClients)})
	}
	if c.runs("budget") {
		sizes := make([]string, len(c.BudgetSizes))
		for i, n := range c.BudgetSizes {
			sizes[i] = report.Thousands(n)
		}
		s = append(s, [2]string{"budget", fmt.Sprintf("budgets of %s at %s clients, each cell until the budget is spent or %v; counterd cells start their own daemons (logs in %s) and stop them with SIGTERM before reading budget_totals",
			strings.Join(sizes, " and "), intList(c.BudgetClients), c.BudgetDuration, report.BudgetLogFile)})
	}
	if c.runs("tickets") {
		s = append(s, [2]string{"tickets", fmt.Sprintf("%s tickets of one owner (interleaved with as many of another) drawn by %s concurrent clients, each cell until every ticket is drawn or %v",
			report.Thousands(int64(c.Tickets)), intList(c.TicketClients), c.BudgetDuration)})
	}
	return s
}

func intList(ns []int) string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strconv.Itoa(n)
	}
	return strings.Join(out, ", ")
}

// rateList writes rates as "10,000, 25,000 and 50,000".
func rateList(rates []float64) string {
	parts := make([]string, len(rates))
	for i, r := range rates {
		parts[i] = report.Thousands(int64(r))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// percentList writes shares as "1, 50".
func percentList(ps []float64) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = strconv.FormatFloat(p, 'g', -1, 64)
	}
	return strings.Join(out, ", ")
}
