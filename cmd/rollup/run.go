package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/robfig/cron/v3"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/admin"
	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/cluster"
	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/database"
	"github.com/counterd/counterd/internal/exposition"
	"github.com/counterd/counterd/internal/logging"
	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/targets"
	"github.com/counterd/counterd/internal/version"
)

// usageError is a bad command line or setting: exit code 2.
type usageError struct{ error }

// errStopped says SIGINT or SIGTERM came before rollup had started any
// work: a clean stop, so run returns nil.
var errStopped = errors.New("stopped before work began")

const usage = `usage: rollup [once]

  rollup       fold slot rows into counters on ROLLUP_SCHEDULE until SIGTERM
  rollup once  fold once and exit
  rollup --version  print the version and exit

Settings come from the environment:

`

func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	cmd, done, err := config.Command[config.Rollup]("rollup", usage, args, stdout, "schedule", "once")
	if err != nil {
		return usageError{err}
	}
	if done {
		return nil
	}
	cfg, err := config.Load[config.Rollup](environ)
	if err != nil {
		return usageError{err}
	}
	log := logging.New(stderr, cfg.LogLevel, cfg.LogFormat)
	pool, err := database.Open(cfg.DatabaseURL, database.Options{
		MaxConns:         2,
		StatementTimeout: cfg.StatementTimeout,
		LockTimeout:      cfg.LockTimeout,
	})
	if err != nil {
		return usageError{err} // Open does not connect: a failure is a bad setting
	}
	defer pool.Close()
	r, err := prepare(ctx, cfg, pool, log)
	if errors.Is(err, errStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	rs, closeParts, err := partitions(ctx, cfg, pool, r)
	if err != nil {
		return err
	}
	defer closeParts()
	if cmd == "once" {
		// rollup once reports on stdout for the operator who ran it.
		for _, r := range rs {
			r.stdout = stdout
		}
		return passAll(ctx, rs)
	}
	if err := serveMetrics(ctx, cfg, r.set, log); err != nil {
		return err
	}
	return schedule(ctx, cfg.Schedule, log, newPassCounts(r.set), func() error { return passAll(ctx, rs) })
}

// partitions returns a roller per partition of ROLLUP_CLUSTER, each over
// its own pool, sharing r's settings and metrics; without a cluster, r
// alone. The returned function closes the partitions' pools.
func partitions(ctx context.Context, cfg config.Rollup, proxy *pgxpool.Pool, r *roller) ([]*roller, func(), error) {
	if cfg.Cluster == "" {
		return []*roller{r}, func() {}, nil
	}
	dsns, err := cluster.Discover(ctx, proxy, cfg.Cluster)
	if err != nil {
		if errors.Is(err, cluster.ErrNotDeclared) || errors.Is(err, cluster.ErrBadDeclaration) {
			return nil, nil, usageError{fmt.Errorf("ROLLUP_CLUSTER: %w", err)}
		}
		return nil, nil, fmt.Errorf("ROLLUP_CLUSTER: %w", err)
	}
	var pools []*pgxpool.Pool
	closeAll := func() {
		for _, p := range pools {
			p.Close()
		}
	}
	rs := make([]*roller, len(dsns))
	for i, dsn := range dsns {
		pool, err := database.Open(dsn, database.Options{MaxConns: 2, StatementTimeout: cfg.StatementTimeout, LockTimeout: cfg.LockTimeout})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("ROLLUP_CLUSTER %s: partition %d: %w", cfg.Cluster, i, err)
		}
		pools = append(pools, pool)
		if err := migrate.Check(ctx, pool); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("ROLLUP_CLUSTER %s: partition %d: %w", cfg.Cluster, i, err)
		}
		st, err := slots.New(pool, slots.Options{Kinds: catalog.Writers()})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		p := *r
		p.store, p.log = st, r.log.With("partition", i)
		rs[i] = &p
	}
	r.log.Info("rolling up a PL/Proxy cluster", "cluster", cfg.Cluster, "partitions", len(rs))
	return rs, closeAll, nil
}

// passAll runs a pass of every roller at once: on a cluster each
// partition folds its own rows exactly once, in its own transactions, and
// one partition failing leaves the others' passes done.
func passAll(ctx context.Context, rs []*roller) error {
	if len(rs) == 1 {
		return rs[0].pass(ctx)
	}
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() {
			if err := r.pass(ctx); err != nil {
				errs[i] = fmt.Errorf("partition %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prepare waits for the database, opens the store and resolves
// ROLLUP_TARGETS against the catalog. It returns errStopped if ctx ended
// first, having logged why.
func prepare(ctx context.Context, cfg config.Rollup, pool *pgxpool.Pool, log *slog.Logger) (*roller, error) {
	if err := database.Wait(ctx, pool, 10*time.Second); err != nil {
		if ctx.Err() != nil {
			// SIGINT or SIGTERM while it waited (Ctrl-C in make run):
			// nothing had started, so this is a clean stop.
			log.Info("stopped before the database answered")
			return nil, errStopped
		}
		if database.Permanent(err) {
			return nil, usageError{fmt.Errorf("DATABASE_URL: %w", err)} // as counterd's
		}
		return nil, err
	}
	// The daemon owns the schema; rollup only needs it to exist, and not
	// to have migrations it does not know unless they were declared
	// compatible with it.
	if err := migrate.Check(ctx, pool); err != nil {
		return nil, err
	}
	store, err := slots.New(pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		return nil, err
	}
	tset, err := targets.Parse(cfg.Targets)
	if err != nil {
		return nil, usageError{fmt.Errorf("ROLLUP_TARGETS: %w", err)}
	}
	// A target the catalog does not back is a bad setting: refuse to
	// start rather than fold into counters alone.
	if err := tset.Resolve(ctx, pool); err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before the first pass")
			return nil, errStopped
		}
		return nil, usageError{fmt.Errorf("ROLLUP_TARGETS: %w", err)}
	}
	for _, t := range tset.Targets() {
		log.Info("rollup target", "pattern", t.Pattern, "column", t.Qualified())
	}
	set := metrics.NewSet()
	version.Register(set)
	sets, err := newSetReconciler(cfg, newReconcileMetrics(set))
	if err != nil {
		return nil, err
	}
	return &roller{cfg: cfg, log: log, store: store, tset: tset, set: set, miss: newMissing(set, tset), pool: pool, sets: sets}, nil
}

// serveMetrics serves the scheduler's metrics on ROLLUP_METRICS_ADDR
// unless it is off, until ctx ends.
func serveMetrics(ctx context.Context, cfg config.Rollup, set *metrics.Set, log *slog.Logger) error {
	if cfg.MetricsAddr == config.MetricsOff {
		return nil
	}
	addr, err := admin.Serve(ctx, cfg.MetricsAddr, admin.Handler([]*metrics.Set{set}, nil, false))
	if err != nil {
		return err
	}
	log.Info("metrics listening", "addr", addr.String())
	return nil
}

// passCounts counts the scheduler's passes by result, so an alert can
// tell a rollup that keeps failing from one that runs.
type passCounts struct{ ok, failed *metrics.Counter }

func newPassCounts(set *metrics.Set) passCounts {
	const help = "Scheduled rollup passes by result: ok, or error (a pass cut short by shutdown counts as neither)."
	return passCounts{
		ok:     exposition.Counter(set, `counterd_rollup_passes_total{result="ok"}`, help),
		failed: exposition.Counter(set, `counterd_rollup_passes_total{result="error"}`, help),
	}
}

// schedule runs pass on spec until ctx ends. A pass never overlaps the
// previous one; a failed pass is logged and counted, and the next one
// tries again.
func schedule(ctx context.Context, spec string, log *slog.Logger, passes passCounts, pass func() error) error {
	c := cron.New(cron.WithChain(cron.SkipIfStillRunning(cron.DiscardLogger)))
	if _, err := c.AddFunc(spec, func() {
		err := pass()
		switch {
		case err == nil:
			passes.ok.Inc()
		case ctx.Err() != nil:
			// SIGTERM cancelled the pass; its chunks are atomic, so
			// nothing is half done. Not an error.
			log.Info("rollup pass cut short by shutdown", "err", err)
		default:
			passes.failed.Inc()
			log.Error("rollup pass failed", "err", err)
		}
	}); err != nil {
		return usageError{fmt.Errorf("ROLLUP_SCHEDULE: %w", err)}
	}
	log.Info("rollup scheduled", "schedule", spec)
	c.Start()
	<-ctx.Done()
	<-c.Stop().Done()
	log.Info("rollup stopped")
	return nil
}
