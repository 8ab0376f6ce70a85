package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
)

// partitionSetup is where one partitions cell's counterd writes: plain
// PostgreSQL (partitions 0: a schema of its own, no cluster) or a
// PL/Proxy cluster of that many partition databases on the same server.
type partitionSetup struct {
	partitions int
	// url is counterd's DATABASE_URL: the plain schema's, or the
	// proxy's; cluster names the cluster ("" for plain).
	url, cluster string
	// total sums counter_totals wherever this setup's counters are.
	total func(context.Context) (int64, error)
	// why says why the setup could not be prepared; its cells are
	// missing rows.
	why string
}

// partitions offers the ingest section's -P 16 load to counterd on plain
// PostgreSQL and on clusters of each COUNTERBENCH_PARTITIONS count, all on
// the run's server, one right after the other within each run (each run
// starting with a different setup), each cell a counterd of its own. The
// clusters are declared afresh at the start by COUNTERBENCH_CLUSTER_SCRIPT,
// so every setup starts empty.
func (b *bench) partitions(ctx context.Context) error {
	tool, lookErr := process.Lookup(b.cfg.RedisBenchmark, "redis-benchmark")
	log, err := b.createLog(report.PartitionsLogFile)
	if err != nil {
		return err
	}
	defer log.Close()
	setups := []*partitionSetup{b.plainSetup(ctx)}
	for _, n := range b.cfg.Partitions {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.progress.note(fmt.Sprintf("declaring a cluster of %d partitions", n))
		setups = append(setups, b.clusterSetup(ctx, n))
	}
	for run := 1; run <= b.cfg.PartitionRuns; run++ {
		for _, s := range rotate(setups, run-1) {
			b.progress.step("partitions %s redis-benchmark -P 16 -n %d (run %d)", report.PartitionsLabel(s.partitions), b.cfg.PartitionRequests, run)
			row := report.Row{
				Section: report.Partitions, Approach: report.Counterd, Partitions: s.partitions,
				Keys: fmt.Sprintf("random of %d", ingestKeys), Clients: ingestClients, Pipeline: 16, Run: run, RowsWritten: -1,
			}
			err := b.partitionCell(ctx, tool, lookErr, s, log, &row)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(row, err)
		}
	}
	return nil
}

// rotate returns s starting at its k-th element (modulo its length).
func rotate[T any](s []T, k int) []T {
	if len(s) == 0 {
		return nil
	}
	k %= len(s)
	return append(append([]T(nil), s[k:]...), s[:k]...)
}

func (b *bench) partitionCell(ctx context.Context, tool string, lookErr error, s *partitionSetup, log *os.File, row *report.Row) (err error) {
	if benchmarkMissing(lookErr, row) {
		return nil
	}
	if s.why != "" {
		row.Missing, row.Note = true, s.why
		return nil
	}
	name := fmt.Sprintf("counterd-parts%d-run%d", s.partitions, row.Run)
	dbURL, err := withParam(s.url, "application_name", "counterbench-"+name)
	if err != nil {
		return err
	}
	srv, err := b.spawnCounterd(ctx, filepath.Join(b.tmp, name), log, "DATABASE_URL="+dbURL, "COUNTERD_CLUSTER="+s.cluster)
	if err != nil {
		return err
	}
	srv.total = s.total
	defer func() { err = errors.Join(err, srv.stop()) }()
	load := b.ingestLoad(16)
	load.requests = b.cfg.PartitionRequests
	_, err = b.counterdAround(ctx, srv, row, func() error { return b.redisBenchmark(ctx, tool, srv.socket, load, row) })
	return err
}

// plainSetup is counterd on the run's server without a cluster: a schema
// of its own, emptied now.
func (b *bench) plainSetup(ctx context.Context) *partitionSetup {
	schema := b.cfg.Schema + "_plain"
	s := &partitionSetup{}
	if err := resetSchema(ctx, b.cfg.DatabaseURL, schema); err != nil {
		s.why = "failed: " + oneLine(err.Error())
		return s
	}
	var err error
	if s.url, err = withSearchPath(b.cfg.DatabaseURL, schema); err != nil {
		s.why = "failed: " + oneLine(err.Error())
		return s
	}
	q := `SELECT coalesce(sum(total), 0)::bigint FROM ` + pgx.Identifier{schema, "counter_totals"}.Sanitize()
	s.total = func(ctx context.Context) (int64, error) {
		var n int64
		if err := b.pool.QueryRow(ctx, q).Scan(&n); err != nil {
			return 0, fmt.Errorf("sum %s.counter_totals: %w", schema, err)
		}
		return n, nil
	}
	return s
}

// clusterSetup declares, afresh, a cluster of n partitions named after
// the run's schema and n (databases NAME_proxy and NAME_p0 ...) on the
// run's server.
func (b *bench) clusterSetup(ctx context.Context, n int) *partitionSetup {
	s := &partitionSetup{partitions: n, cluster: clusterName(b.cfg.Schema, n)}
	out, err := process.Output(ctx, b.cfg.ClusterScript, "--fresh", b.cfg.DatabaseURL, strconv.Itoa(n), s.cluster)
	if err != nil {
		s.why = "declaring the cluster failed: " + oneLine(err.Error())
		return s
	}
	s.url = strings.TrimSpace(string(out))
	parts, err := partitionURLs(s.url, s.cluster, n)
	if err != nil {
		s.why = "failed: " + oneLine(err.Error())
		return s
	}
	s.total = func(ctx context.Context) (int64, error) { return sumPartitions(ctx, parts) }
	return s
}

// clusterName is the cluster of n partitions of the run whose schema is
// schema.
func clusterName(schema string, n int) string { return fmt.Sprintf("%s_%d", schema, n) }

// partitionURLs are the URLs of a cluster's partition databases (NAME_p0
// ...), made from its proxy's URL as scripts/cluster.sh names them.
func partitionURLs(proxy, name string, n int) ([]string, error) {
	u, err := url.Parse(proxy)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("the proxy's URL %q is not a postgres:// URL", proxy)
	}
	out := make([]string, n)
	for i := range out {
		p := *u
		p.Path, p.RawPath = fmt.Sprintf("/%s_p%d", name, i), ""
		out[i] = p.String()
	}
	return out, nil
}

// sumPartitions sums counter_totals over every partition.
func sumPartitions(ctx context.Context, urls []string) (int64, error) {
	var sum int64
	for i, u := range urls {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			return 0, fmt.Errorf("connect to partition %d: %w", i, err)
		}
		var n int64
		err = c.QueryRow(ctx, `SELECT coalesce(sum(total), 0)::bigint FROM counter_totals`).Scan(&n)
		c.Close(ctx)
		if err != nil {
			return 0, fmt.Errorf("sum partition %d's counter_totals: %w", i, err)
		}
		sum += n
	}
	return sum, nil
}
