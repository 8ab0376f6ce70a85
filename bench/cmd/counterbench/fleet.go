package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/bench/internal/peer"
	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/loadgen"
	"github.com/counterd/counterd/internal/database"
)

// fleetPipelines are the fleet section's depths: unpipelined, as an app
// server's requests mostly send, and 16 a round trip.
var fleetPipelines = []int{1, 16}

// fleetPollerApp is the application_name of the connection a fleet cell
// reads PostgreSQL with while it measures: the only one of the
// benchmark's own, so its transactions can be taken off the database's.
const fleetPollerApp = "counterbench-fleet-poller"

// fleet runs, for each COUNTERBENCH_FLEET_KEYS workload and pipeline
// depth, every COUNTERBENCH_FLEET_SIZES number of counterd daemons and the
// peer under the same total load, one right after the other (each group
// starting with a different setup, so none always goes first).
func (b *bench) fleet(ctx context.Context) error {
	tool, lookErr := process.Lookup(b.cfg.RedisBenchmark, "redis-benchmark")
	log, err := b.createLog(report.FleetLogFile)
	if err != nil {
		return err
	}
	b.fleetLog = log
	if err := b.openFleetDatabase(ctx); err != nil {
		return err
	}
	setups := append(slices.Clone(b.cfg.FleetSizes), 0) // 0: the peer
	group := 0
	for _, keys := range b.cfg.FleetKeys {
		for _, p := range fleetPipelines {
			for _, n := range rotate(setups, group) {
				row := report.Row{
					Section: report.Fleet, Approach: report.Peer, Keys: report.Thousands(int64(keys)),
					Clients: ingestClients, Pipeline: p, Daemons: n, RowsWritten: -1, Transactions: -1,
				}
				if n > 0 {
					row.Approach, row.Clients = report.Counterd, n*fleetClients(n)
				}
				b.progress.step("fleet %s -r %d -P %d -n %d", report.FleetLabel(row), keys, p, b.cfg.FleetRequests)
				err := b.fleetCell(ctx, tool, lookErr, keys, &row)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				b.add(row, err)
			}
			group++
		}
	}
	return nil
}

// fleetClients is each of n daemons' share of the ingest section's 50
// clients, at least one.
func fleetClients(n int) int { return max(1, ingestClients/n) }

// fleetShares splits total increments over n daemons in whole pipelines
// of 16, the first ones taking the pipelines left over.
func fleetShares(total, n int) []int {
	chunks := total / 16
	out := make([]int, n)
	for i := range out {
		out[i] = chunks / n * 16
		if i < chunks%n {
			out[i] += 16
		}
	}
	return out
}

// fleetDBConns is each fleet daemon's pool: COUNTERD_DB_MAX_CONNS when
// the environment sets it, else the fewest counterd accepts (one more
// than COUNTERD_WRITERS), so that 32 daemons take 96 connections, within
// the throwaway server's max_connections of 200.
func (b *bench) fleetDBConns() int {
	if n, err := strconv.Atoi(lookupEnv(b.environ, "COUNTERD_DB_MAX_CONNS")); err == nil && n > 0 {
		return n
	}
	writers := 2 // COUNTERD_WRITERS' default
	if n, err := strconv.Atoi(lookupEnv(b.environ, "COUNTERD_WRITERS")); err == nil && n > 0 {
		writers = n
	}
	return writers + 1
}

// lookupEnv is the last value environ gives name, or "".
func lookupEnv(environ []string, name string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(environ[i], name+"="); ok {
			return v
		}
	}
	return ""
}

func (b *bench) fleetCell(ctx context.Context, tool string, lookErr error, keys int, row *report.Row) error {
	if benchmarkMissing(lookErr, row) {
		return nil
	}
	if row.Approach == report.Peer {
		return b.fleetPeer(ctx, tool, keys, row)
	}
	return b.fleetCounterd(ctx, tool, keys, row)
}

// fleetCounterd measures row.Daemons daemons started for the cell, each
// given its share of the load by a redis-benchmark of its own, all at
// once.
func (b *bench) fleetCounterd(ctx context.Context, tool string, keys int, row *report.Row) (err error) {
	seq := b.nextSeed()
	var daemons []*counterdServer
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		var errs []error
		for _, d := range daemons {
			errs = append(errs, d.stop())
		}
		return errors.Join(errs...)
	}
	defer func() { err = errors.Join(err, stop()) }()
	for i := range row.Daemons {
		dir := filepath.Join(b.tmp, fmt.Sprintf("fleet%d-%d", seq, i))
		// spawnCounterd's application_name, on the fleet's database.
		url, err := withParam(b.fleetURL, "application_name", "counterbench-"+filepath.Base(dir))
		if err != nil {
			return err
		}
		d, err := b.spawnCounterd(ctx, dir, b.fleetLog, "DATABASE_URL="+url, "COUNTERD_DB_MAX_CONNS="+strconv.Itoa(b.fleetDBConns()))
		if err != nil {
			return err
		}
		daemons = append(daemons, d)
	}
	// A round of every daemon before the cell, so that the pools have
	// connected and the plans are made.
	for i, d := range daemons {
		if err := d.ctl.Incr(ctx, fmt.Sprintf("fleet-warm:%d:%d", seq, i)).Err(); err != nil {
			return fmt.Errorf("daemon %d: warm-up INCR: %w", i, err)
		}
		if err := d.flush(ctx); err != nil {
			return fmt.Errorf("daemon %d: %w", i, err)
		}
	}
	if err := waitFleetSeen(ctx, daemons); err != nil {
		return err
	}
	var apps []string
	for _, d := range daemons {
		apps = append(apps, d.app)
	}
	m := &fleetMeter{b: b, apps: apps, visible: `SELECT key FROM counter_totals($1::text[]) WHERE total > 0`,
		total: `SELECT coalesce(sum(total), 0)::bigint FROM counter_totals`}
	for _, d := range daemons {
		m.pids = append(m.pids, d.proc.Pid())
	}
	defer m.close()
	if err := m.start(ctx, seq, func(ctx context.Context, i int, key string) error {
		return daemons[i%len(daemons)].ctl.Incr(ctx, key).Err()
	}); err != nil {
		return err
	}
	shares := fleetShares(b.cfg.FleetRequests, row.Daemons)
	parts := make([]report.Row, row.Daemons)
	errs := make([]error, row.Daemons)
	start := time.Now()
	var wg sync.WaitGroup
	for i, d := range daemons {
		wg.Go(func() {
			l := benchmarkLoad{clients: fleetClients(row.Daemons), keys: keys, requests: shares[i], pipeline: row.Pipeline,
				command: []string{"incr", "post:__rand_int__"}}
			if b.cfg.FleetRate > 0 {
				errs[i] = b.fleetPaced(ctx, d.socket, "", l, b.cfg.FleetRate/float64(row.Daemons), seq<<8|uint64(i), &parts[i])
				return
			}
			errs[i] = b.redisBenchmark(ctx, tool, d.socket, l, &parts[i])
		})
	}
	wg.Wait()
	row.Elapsed = time.Since(start)
	m.stopProbes()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, p := range parts {
		row.Increments += p.Increments
		// A paced load runs in counterbench: its CPU is not measured.
		row.CPU.Client.Time, row.CPU.Client.Known = row.CPU.Client.Time+p.CPU.Client.Time, p.CPU.Client.Known
		row.P50, row.P99 = max(row.P50, p.P50), max(row.P99, p.P99)
	}
	row.Rate, row.Offered = float64(row.Increments)/row.Elapsed.Seconds(), b.cfg.FleetRate
	drainStart := time.Now()
	for i, d := range daemons {
		wg.Go(func() { errs[i] = d.flush(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	row.Drain = time.Since(drainStart)
	return m.finish(ctx, row, stop)
}

// fleetPeer measures the Redis-buffer-plus-worker pattern under the fleet
// section's load: redis-server with appendfsync everysec (the ingest
// section's), a worker started for the cell, one redis-benchmark of
// HINCRBYs with all the clients, then the worker's drain.
func (b *bench) fleetPeer(ctx context.Context, tool string, keys int, row *report.Row) (err error) {
	srv, why := b.startRedisFlavor(ctx, redisEverysec)
	if srv == nil {
		row.Missing, row.Note = true, why
		return nil
	}
	if err := peer.CreateTable(ctx, b.fleetPool); err != nil {
		return fmt.Errorf("create %s: %w", peer.Table, err)
	}
	if err := srv.ctl.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	w, err := b.startPeerWorker(ctx, srv.socket, b.fleetURL)
	if err != nil {
		return err
	}
	stop := func() error { return w.Stop(time.Minute) }
	defer func() { err = errors.Join(err, stop()) }()
	m := &fleetMeter{b: b, apps: []string{peerWorkerApp}, pids: []int{srv.proc.Pid()}, worker: w.Pid(),
		visible: `SELECT key FROM ` + peer.Table + ` WHERE key = ANY($1::text[])`,
		total:   `SELECT coalesce(sum(total), 0)::bigint FROM ` + peer.Table}
	defer m.close()
	if err := m.start(ctx, b.nextSeed(), func(ctx context.Context, _ int, key string) error {
		return srv.ctl.HIncrBy(ctx, peer.Hash, key, 1).Err()
	}); err != nil {
		return err
	}
	l := benchmarkLoad{clients: ingestClients, keys: keys, requests: b.cfg.FleetRequests, pipeline: row.Pipeline,
		command: []string{"hincrby", peer.Hash, "post:__rand_int__", "1"}}
	if b.cfg.FleetRate > 0 {
		err = b.fleetPaced(ctx, srv.socket, peer.Hash, l, b.cfg.FleetRate, b.nextSeed(), row)
	} else {
		err = b.redisBenchmark(ctx, tool, srv.socket, l, row)
	}
	m.stopProbes()
	if err != nil {
		return err
	}
	if row.Drain, err = drainPeer(ctx, srv.ctl, w); err != nil {
		return err
	}
	return m.finish(ctx, row, stop)
}

// fleetPaced offers load l at rate increments a second over socket with
// counterbench's own load generator: INCR, or HINCRBY hash KEY 1 when
// hash is set. Its keys are keyspace names (post:N), drawn uniformly
// below l.keys as redis-benchmark's -r draws them, from seed. Daemons'
// loads run at once, so it takes no seed from b itself.
func (b *bench) fleetPaced(ctx context.Context, socket, hash string, l benchmarkLoad, rate float64, seed uint64, row *report.Row) error {
	res, err := loadgen.Run(ctx, loadgen.Config{Network: "unix", Addr: socket, Clients: l.clients, Pipeline: l.pipeline,
		Requests: l.requests, Rate: rate, Keys: l.keys, Hash: hash, Seed: seed})
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d of %d commands answered with an error", res.Errors, res.Errors+res.Ops)
	}
	row.Increments, row.Offered = res.Ops, b.cfg.FleetRate
	row.Elapsed, row.Rate, row.P50, row.P99 = res.Elapsed, res.Rate(), res.P50, res.P99
	return nil
}

// fleetMeter reads what one fleet cell cost PostgreSQL and the sidecars,
// and how stale SQL was, through one connection of its own.
type fleetMeter struct {
	b *bench
	// apps are the application_names of the sidecars' connections; pids
	// the sidecars' processes (the daemons, or redis-server), worker the
	// peer's worker (0 for counterd).
	apps   []string
	pids   []int
	worker int
	// visible returns which of the keys $1 show in SQL; total sums
	// every total the cell adds to.
	visible, total string

	conn *pgx.Conn
	// queries counts the statements sent on conn from the first reading
	// on: each is one transaction of the database's.
	queries int64
	before  fleetStats
	lsn     string
	stored  int64
	pgAt    time.Duration
	pgOK    bool
	cpuAt   []time.Duration
	cpuOK   bool
	probes  *probes
}

// fleetStats are the cumulative counters a cell reads before and after:
// rows written in the run's schema and the database's transactions.
type fleetStats struct{ rows, xacts int64 }

// fleetStatsQuery reads fleetStats. Each statement outside a transaction
// block takes a fresh statistics snapshot, so no pg_stat_clear_snapshot()
// is needed; what a backend has not yet reported is the caller's concern.
const fleetStatsQuery = `SELECT
  (SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables WHERE schemaname = $1),
  (SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = current_database())`

// start connects, waits COUNTERBENCH_FLEET_SETTLE for every backend to
// report the statistics of the cell's start-up (PostgreSQL 15 reports an
// idle backend's up to 10 s late), takes the first readings and starts
// the probes, which send with send.
func (m *fleetMeter) start(ctx context.Context, seq uint64, send func(ctx context.Context, i int, key string) error) error {
	url, err := withParam(m.b.fleetURL, "application_name", fleetPollerApp)
	if err != nil {
		return err
	}
	if m.conn, err = pgx.Connect(ctx, url); err != nil {
		return fmt.Errorf("connect the poller: %w", err)
	}
	select {
	case <-time.After(m.b.cfg.FleetSettle):
	case <-ctx.Done():
		return ctx.Err()
	}
	m.queries++
	if err := m.conn.QueryRow(ctx, fleetStatsQuery, m.b.cfg.Schema).Scan(&m.before.rows, &m.before.xacts); err != nil {
		return fmt.Errorf("read PostgreSQL's statistics: %w", err)
	}
	m.queries++
	if err := m.conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&m.lsn); err != nil {
		return fmt.Errorf("read the WAL position: %w", err)
	}
	m.queries++
	if err := m.conn.QueryRow(ctx, m.total).Scan(&m.stored); err != nil {
		return fmt.Errorf("sum the totals: %w", err)
	}
	if m.b.postmaster != 0 {
		m.pgAt, m.pgOK = tree(m.b.postmaster)
	}
	m.cpuAt, m.cpuOK = m.sidecarCPU()
	m.probes = startProbes(ctx, fmt.Sprintf("fleet-probe:%d:", seq), send, func(ctx context.Context, keys []string) ([]string, error) {
		m.queries++
		rows, err := m.conn.Query(ctx, m.visible, keys)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	})
	return nil
}

// sidecarCPU reads every sidecar process's CPU, the worker's last.
func (m *fleetMeter) sidecarCPU() ([]time.Duration, bool) {
	pids := m.pids
	if m.worker != 0 {
		pids = append(slices.Clone(pids), m.worker)
	}
	out := make([]time.Duration, len(pids))
	for i, pid := range pids {
		t, ok := tree(pid)
		if !ok {
			return nil, false
		}
		out[i] = t
	}
	return out, true
}

// stopProbes stops sending probes; those sent are still awaited.
func (m *fleetMeter) stopProbes() {
	if m.probes != nil {
		m.probes.stopSending()
	}
}

// finish runs once everything acknowledged is committed: it takes the
// CPU readings, waits for every probe to show, reads the WAL and the
// totals, stops the sidecars with stop and, once their backends and the
// poller's have exited (reporting their statistics as they do), reads
// the rows and transactions.
func (m *fleetMeter) finish(ctx context.Context, row *report.Row, stop func() error) error {
	if m.pgOK {
		if now, ok := tree(m.b.postmaster); ok {
			row.CPU.PGServer = report.Share{Time: now - m.pgAt, Known: true}
		}
	}
	if now, ok := m.sidecarCPU(); ok && m.cpuOK {
		var sum time.Duration
		for i := range m.pids {
			d := now[i] - m.cpuAt[i]
			sum += d
			if m.worker == 0 {
				row.DaemonCPU = append(row.DaemonCPU, d)
			}
		}
		row.CPU.Server = report.Share{Time: sum, Known: true}
		if m.worker != 0 {
			row.CPU.Worker = report.Share{Time: now[len(now)-1] - m.cpuAt[len(m.cpuAt)-1], Known: true}
		}
	}
	delays, sent, err := m.probes.wait(ctx, fleetProbeTimeout)
	m.probes = nil
	if err != nil {
		return err
	}
	row.Staleness = report.StalenessOf(delays)
	m.queries++
	if err := m.conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, m.lsn).Scan(&row.WALBytes); err != nil {
		return fmt.Errorf("read the WAL position: %w", err)
	}
	var stored int64
	m.queries++
	if err := m.conn.QueryRow(ctx, m.total).Scan(&stored); err != nil {
		return fmt.Errorf("sum the totals: %w", err)
	}
	// The probes' increments are acknowledged increments too.
	row.Increments += int64(sent)
	row.Checked, row.Stored = true, stored-m.stored
	if err := stop(); err != nil {
		return err
	}
	if err := m.close(); err != nil {
		return err
	}
	if err := m.b.waitBackendsGone(ctx, append(slices.Clone(m.apps), fleetPollerApp)); err != nil {
		return err
	}
	var after fleetStats
	if err := m.b.fleetPool.QueryRow(ctx, fleetStatsQuery, m.b.cfg.Schema).Scan(&after.rows, &after.xacts); err != nil {
		return fmt.Errorf("read PostgreSQL's statistics: %w", err)
	}
	row.RowsWritten = after.rows - m.before.rows
	row.Transactions = after.xacts - m.before.xacts - m.queries
	return nil
}

// close stops any probes and closes the poller's connection.
func (m *fleetMeter) close() error {
	if m.probes != nil {
		m.probes.stopSending()
		m.probes.abandon()
		m.probes = nil
	}
	if m.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := m.conn.Close(ctx)
	m.conn = nil
	return err
}

// waitBackendsGone waits until no backend has one of apps as its
// application_name. A backend reports its statistics before it leaves
// pg_stat_activity.
func (b *bench) waitBackendsGone(ctx context.Context, apps []string) error {
	deadline := time.Now().Add(backendsGoneTimeout)
	for {
		var n int
		if err := b.fleetPool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = ANY($1) AND datname = current_database()`, apps).Scan(&n); err != nil {
			return fmt.Errorf("count the cell's backends: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of the cell's backends were still there %v after it stopped", n, backendsGoneTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backendPoll / 10):
		}
	}
}

// openFleetDatabase creates, afresh, a database of the fleet section's own
// on the run's server (COUNTERBENCH_SCHEMA_fleet, holding the schema
// COUNTERBENCH_SCHEMA), so that pg_stat_database counts the cells'
// transactions and no other client's of DATABASE_URL's database.
func (b *bench) openFleetDatabase(ctx context.Context) error {
	name := fleetDatabase(b.cfg.Schema)
	admin, err := pgx.Connect(ctx, b.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	id := pgx.Identifier{name}.Sanitize()
	b.progress.note("creating database " + name + " for the fleet section")
	for _, q := range []string{"DROP DATABASE IF EXISTS " + id + " WITH (FORCE)", "CREATE DATABASE " + id} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	url, err := withDatabase(b.cfg.DatabaseURL, name)
	if err != nil {
		return err
	}
	if err := resetSchema(ctx, url, b.cfg.Schema); err != nil {
		return err
	}
	if b.fleetURL, err = withSearchPath(url, b.cfg.Schema); err != nil {
		return err
	}
	b.fleetPool, err = database.Open(b.fleetURL, database.Options{MaxConns: 4})
	return err
}

// fleetDatabase names the fleet section's database.
func fleetDatabase(schema string) string { return schema + "_fleet" }

// withDatabase is conn, a URL or a DSN, naming database name instead.
func withDatabase(conn, name string) (string, error) {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return "", errors.New("DATABASE_URL is not a valid PostgreSQL URL")
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	return conn + " dbname=" + name, nil // the last keyword wins
}

// fleetSeenTimeout bounds the wait for every daemon to count the whole
// fleet: a heartbeat every third of COUNTERD_OWNER_TTL (30 s) counts it.
const fleetSeenTimeout = 45 * time.Second

// waitFleetSeen waits until every daemon's counterd_fleet_daemons is the
// number started, so the cell measures the fleet rule at work rather than
// the rounds of daemons that started before the others. A counterd
// without that metric (an older build, no metrics listener) is not
// waited for.
func waitFleetSeen(ctx context.Context, daemons []*counterdServer) error {
	deadline := time.Now().Add(fleetSeenTimeout)
	for i, d := range daemons {
		for {
			m, err := d.scrape(ctx)
			if err != nil {
				return fmt.Errorf("daemon %d: %w", i, err)
			}
			n, ok := m["counterd_fleet_daemons"]
			if !ok || int(n) == len(daemons) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("daemon %d counts %v daemons on the database after %v; want %d", i, n, fleetSeenTimeout, len(daemons))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}
