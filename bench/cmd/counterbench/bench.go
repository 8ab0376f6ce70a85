package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/database"
)

// bench is one run: its settings, the database, the servers it started
// and the rows measured so far.
type bench struct {
	cfg      settings
	environ  []string
	progress *progress
	pool     *pgxpool.Pool
	// url is DATABASE_URL with the run's schema as search_path.
	url string
	// tmp holds sockets, counterd's journal and redis-server's files.
	tmp string

	counterd *counterdServer
	// redises are the redis-servers started, by flavor name; redisWhy
	// says why a flavor could not start, once known.
	redises     map[string]*redisServer
	redisWhy    map[string]string
	redisAbsent string // why there is no plain redis-server, once known

	// postmaster is the pid of the PostgreSQL server when its processes
	// can be read here, else 0 and postmasterWhy says why.
	postmaster    int
	postmasterWhy string

	rows     []report.Row
	failures int
	seed     uint64

	// The budget and tickets sections' rows, the log their daemons
	// share, and why counterd's TAKE cells are skipped, once known.
	budgetRows    []report.BudgetRow
	ticketRows    []report.TicketRow
	budgetLogFile *os.File
	takeAbsent    string

	// The uniques section's daemon, restarted after every PFADD cell, and
	// the log its runs share.
	uniquesD   *counterdServer
	uniquesLog *os.File

	// peerLog is what the peer's workers printed, one per ingest cell.
	peerLog *os.File
	// fleetLog is what the fleet section's daemons printed; fleetURL and
	// fleetPool reach the fleet section's own database.
	fleetLog  *os.File
	fleetURL  string
	fleetPool *pgxpool.Pool
	// setsPool is the sets section's likes pattern's connections.
	setsPool *pgxpool.Pool
}

// newBench checks the tools, recreates the schema and opens the pool.
func newBench(ctx context.Context, cfg settings, environ []string, stderr io.Writer) (*bench, error) {
	b := &bench{cfg: cfg, environ: environ, progress: newProgress(stderr)}
	if b.needsCounterd() {
		path, err := process.Lookup(cfg.Counterd, "counterd")
		if err != nil {
			return nil, usageError{fmt.Errorf("COUNTERBENCH_COUNTERD: %w; run make build", err)}
		}
		b.cfg.Counterd = path
	}
	url, err := withSearchPath(cfg.DatabaseURL, cfg.Schema)
	if err != nil {
		return nil, err
	}
	b.url = url
	if err := resetSchema(ctx, cfg.DatabaseURL, cfg.Schema); err != nil {
		return nil, err
	}
	if b.pool, err = database.Open(url, database.Options{MaxConns: b.maxConns()}); err != nil {
		return nil, err
	}
	if err := b.checkConnections(ctx); err != nil {
		b.pool.Close()
		return nil, err
	}
	if err := removeStaleLogs(cfg.Out); err != nil {
		b.pool.Close()
		return nil, err
	}
	if b.tmp, err = os.MkdirTemp("", "cbench"); err != nil {
		b.pool.Close()
		return nil, err
	}
	return b, nil
}

// maxConns is the pool size: the most clients of any cell, and room for
// the reads around them.
func (b *bench) maxConns() int {
	c := b.cfg.Clients[len(b.cfg.Clients)-1]
	if b.cfg.runs("budget") {
		c = max(c, slices.Max(b.cfg.BudgetClients))
	}
	if b.cfg.runs("tickets") {
		c = max(c, slices.Max(b.cfg.TicketClients))
	}
	return c + 4
}

func (b *bench) needsCounterd() bool {
	if b.cfg.runs("ingest") || b.cfg.runs("latency") || b.cfg.runs("sustain") || b.cfg.runs("windows") || b.cfg.runs("uniques") || b.cfg.runs("partitions") || b.cfg.runs("fleet") || b.cfg.runs("sets") || b.cfg.needsTake() {
		return true
	}
	return slices.ContainsFunc(b.cfg.Approaches, func(name string) bool {
		a, _ := lookupApproach(name)
		return a.kind == counterdKind
	})
}

// checkConnections fails early when the server cannot take the pool plus
// counterd's connections.
func (b *bench) checkConnections(ctx context.Context) error {
	var max, reserved int
	err := b.pool.QueryRow(ctx, `SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int`).Scan(&max, &reserved)
	if err != nil {
		return fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	var used int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity`).Scan(&used); err != nil {
		return fmt.Errorf("count connections: %w", err)
	}
	// Two daemons at once in the budget section.
	const counterdConns = 16
	if need := b.maxConns() + counterdConns; need > max-reserved-used {
		return usageError{&config.Error{Var: "COUNTERBENCH_CLIENTS",
			Msg: fmt.Sprintf("needs %d database connections; the server has %d free (max_connections %d)", need, max-reserved-used, max)}}
	}
	// The likes pattern's pool besides the run's.
	if need := b.maxConns() + counterdConns + b.cfg.SetsClients; b.cfg.runs("sets") && need > max-reserved-used {
		return usageError{&config.Error{Var: "COUNTERBENCH_SETS_CLIENTS",
			Msg: fmt.Sprintf("needs %d database connections; the server has %d free (max_connections %d)", need, max-reserved-used, max)}}
	}
	if !b.cfg.runs("fleet") {
		return nil
	}
	// The poller's connection and the peer's worker besides the pool.
	if need := b.maxConns() + slices.Max(b.cfg.FleetSizes)*b.fleetDBConns() + 2; need > max-reserved-used {
		return usageError{&config.Error{Var: "COUNTERBENCH_FLEET_SIZES",
			Msg: fmt.Sprintf("needs %d database connections (%d a daemon); the server has %d free (max_connections %d)", need, b.fleetDBConns(), max-reserved-used, max)}}
	}
	return nil
}

// close stops every server the run started and removes its files.
func (b *bench) close() error {
	var errs []error
	if b.counterd != nil {
		errs = append(errs, b.counterd.stop())
	}
	for _, f := range []redisFlavor{redisPlain, redisEverysec} {
		if srv := b.redises[f.name]; srv != nil {
			errs = append(errs, srv.stop())
		}
	}
	if b.uniquesD != nil {
		errs = append(errs, b.uniquesD.stop())
	}
	if b.uniquesLog != nil {
		errs = append(errs, b.uniquesLog.Close())
	}
	if b.budgetLogFile != nil {
		errs = append(errs, b.budgetLogFile.Close())
	}
	if b.peerLog != nil {
		errs = append(errs, b.peerLog.Close())
	}
	if b.fleetLog != nil {
		errs = append(errs, b.fleetLog.Close())
	}
	if b.fleetPool != nil {
		b.fleetPool.Close()
	}
	if b.setsPool != nil {
		b.setsPool.Close()
	}
	if b.pool != nil {
		b.pool.Close()
	}
	if b.tmp != "" {
		errs = append(errs, os.RemoveAll(b.tmp))
	}
	return errors.Join(errs...)
}

// run measures every selected section and returns the report, also when
// it stops early.
func (b *bench) run(ctx context.Context) (*report.Report, error) {
	start := time.Now()
	rep := &report.Report{Started: start, Command: b.command(), Clients: b.cfg.Clients}
	rep.Machine = report.DescribeMachine()
	rep.Machine.PostgreSQL = b.describePostgres(ctx)
	b.postmaster, b.postmasterWhy = b.findPostmaster(ctx)
	rep.Machine.Redis = b.describeRedis(ctx)
	for _, name := range b.cfg.Approaches {
		a, _ := lookupApproach(name)
		rep.Approaches = append(rep.Approaches, report.Approach{Name: a.name, Summary: a.summary})
		if a.name == baseline {
			rep.Baseline = baseline
		}
	}
	for _, d := range b.cfg.dists() {
		rep.Dists = append(rep.Dists, report.Dist{Name: d.String(), Summary: d.Describe(b.cfg.Keyspace)})
	}
	rep.Settings = b.describeSettings()
	rep.BudgetPart = b.budgetPart()

	b.progress.total = b.cells()
	var err error
	for _, s := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"matrix", b.matrix},
		{"ceiling", b.ceiling},
		{"ingest", b.ingest},
		{"latency", b.latency},
		{"sustain", b.sustain},
		{"windows", b.windows},
		{"uniques", b.uniquesSection},
		{"partitions", b.partitions},
		{"budget", b.budgets},
		{"tickets", b.ticketsSection},
		{"fleet", b.fleet},
		{"sets", b.setsSection},
	} {
		if !b.cfg.runs(s.name) {
			continue
		}
		if err = s.run(ctx); err != nil {
			err = fmt.Errorf("%s: %w", s.name, err)
			break
		}
	}
	b.progress.finish()
	rep.Rows = b.rows
	rep.Budgets, rep.Tickets = b.budgetRows, b.ticketRows
	rep.Elapsed = time.Since(start)
	if err == nil && b.failures > 0 {
		err = fmt.Errorf("%d cells failed; their rows say why", b.failures)
	}
	return rep, err
}

// cells counts the measurements the progress line counts down.
func (b *bench) cells() int {
	n := 0
	if b.cfg.runs("matrix") {
		n += len(b.cfg.Approaches) * len(b.cfg.Keys) * len(b.cfg.Clients)
	}
	if b.cfg.runs("ceiling") {
		n += 2 * len(ceilingDists(b.cfg.dists()))
	}
	if b.cfg.runs("ingest") {
		n += 2*len(ingestServers)*b.cfg.IngestRuns + len(b.latencyTargetCells())
	}
	if b.cfg.runs("latency") {
		n += len(latencyServers) * len(b.cfg.LatencyRates)
	}
	if b.cfg.runs("sustain") {
		n++
	}
	if b.cfg.runs("windows") {
		n += 2
	}
	if b.cfg.runs("uniques") {
		n += b.cfg.UniquesRuns * (4 + len(b.cfg.OnceRepeats))
	}
	if b.cfg.runs("partitions") {
		n += b.cfg.PartitionRuns * (1 + len(b.cfg.Partitions))
	}
	if b.cfg.runs("budget") {
		n += len(b.cfg.BudgetSizes) * len(b.cfg.BudgetApproaches) * len(b.cfg.BudgetClients)
	}
	if b.cfg.runs("tickets") {
		n += len(ticketApproaches()) * len(b.cfg.TicketClients)
	}
	if b.cfg.runs("fleet") {
		n += len(b.cfg.FleetKeys) * len(fleetPipelines) * (len(b.cfg.FleetSizes) + 1)
	}
	if b.cfg.runs("sets") {
		n += b.cfg.SetsRuns * setsCellCount()
	}
	return n
}

// add records a row; a row that failed counts towards the run's error.
func (b *bench) add(r report.Row, err error) {
	if err != nil {
		r.Missing = true
		r.Note = "failed: " + oneLine(err.Error())
		b.failures++
		b.progress.note(fmt.Sprintf("%s %s c=%d failed: %v", r.Approach, r.Keys, r.Clients, err))
	}
	// A SADD row's total grows by the new members, not the requests.
	sadd := r.Section == report.Sets && r.Command != report.CommandIncr
	if r.Checked && !r.Exact() && !r.Estimate && r.Approach != "naive" && !sadd {
		b.progress.note(fmt.Sprintf("WARNING: %s %s c=%d stored %d for %d increments acknowledged",
			r.Approach, r.Keys, r.Clients, r.Stored, r.Increments))
	}
	b.rows = append(b.rows, r)
}

// nextSeed gives every cell its own random streams.
func (b *bench) nextSeed() uint64 {
	b.seed++
	return b.seed
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// testHookDraw, when set, runs before every key a load draws. A client
// draws its first key once it is connected, so a test can act on a load
// that is under way.
var testHookDraw func()

// sourceFor returns loadgen's per-client key source for d.
func (b *bench) sourceFor(d keyspace.Dist) func(rng *rand.Rand) func() uint64 {
	n, hook := b.cfg.Keyspace, testHookDraw
	return func(rng *rand.Rand) func() uint64 {
		next := d.Source(rng, n)
		if hook == nil {
			return next
		}
		return func() uint64 { hook(); return next() }
	}
}
