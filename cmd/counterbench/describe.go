package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/counterd/counterd/internal/keyspace"
	"github.com/counterd/counterd/internal/pattern"
	"github.com/counterd/counterd/internal/process"
)

// command is the shell command that reproduces the run: every
// COUNTERBENCH_ and COUNTERD_ variable that was set, then make bench.
func (b *bench) command() string {
	var vars []string
	for _, kv := range b.environ {
		if strings.HasPrefix(kv, "COUNTERBENCH_") || strings.HasPrefix(kv, "COUNTERD_") {
			k, v, _ := strings.Cut(kv, "=")
			vars = append(vars, k+"="+shellQuote(v))
		}
	}
	slices.Sort(vars)
	return strings.Join(append(vars, "make bench"), " ")
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
		{"counterd", "started by the run with its defaults (journal on, fsync everysec), except COUNTERD_HOT_STRATEGY=exact so totals can be checked, and any COUNTERD_* set in the environment"},
		{"redis-server", "started by the run: Unix socket only, --save '' --appendonly no"},
	}
	if c.runs("ceiling") {
		s = append(s, [2]string{"ceiling", fmt.Sprintf("up to %d distinct keys per statement", c.CeilingBatch)})
	}
	if c.runs("ingest") {
		s = append(s, [2]string{"ingest", fmt.Sprintf("redis-benchmark -c 50 -r 100000 -n %d -P 1 and -P 16", c.IngestRequests)})
	}
	if c.runs("latency") {
		s = append(s, [2]string{"latency", fmt.Sprintf("%d unpipelined clients offering %.0f INCR/s in total for %v, uniform keys", c.LatencyClients, c.LatencyRate, c.Duration)})
	}
	return s
}
