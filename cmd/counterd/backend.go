package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/budget"
	"github.com/counterd/counterd/internal/cluster"
	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/database"
	"github.com/counterd/counterd/internal/exposition"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// backend is the PostgreSQL counterd runs on: the DATABASE_URL database
// alone, or, with COUNTERD_CLUSTER, the partitions of the PL/Proxy
// cluster declared there, each key's rows on its partition.
type backend struct {
	// proxy is DATABASE_URL's pool: the one database, or the proxy.
	proxy *pgxpool.Pool
	// parts are the partitions' pools in partition order; nil without a
	// cluster.
	parts []*pgxpool.Pool
	// cluster is COUNTERD_CLUSTER.
	cluster string
	// cs is the store over the partitions, once made.
	cs *cluster.Store
}

// pools are the databases rows live in: the partitions, or the one.
func (b *backend) pools() []*pgxpool.Pool {
	if b.parts == nil {
		return []*pgxpool.Pool{b.proxy}
	}
	return b.parts
}

// close closes the partitions' pools (not the proxy's, which the caller
// opened).
func (b *backend) close() {
	for _, p := range b.parts {
		p.Close()
	}
}

// discoverWait is how long a daemon with COUNTERD_CLUSTER waits at start
// between attempts to read the cluster's partitions from the proxy.
const discoverWait = 2 * time.Second

// openBackend opens the partitions of cfg.Cluster, read from the proxy
// database; without a cluster, it is proxy alone. The partitions are
// needed before anything is served (every key's partition depends on
// how many there are), so it waits for the proxy database to answer,
// until ctx ends, saying so in the log.
func openBackend(ctx context.Context, cfg config.Counterd, proxy *pgxpool.Pool, log *slog.Logger) (*backend, error) {
	b := &backend{proxy: proxy, cluster: cfg.Cluster}
	if cfg.Cluster == "" {
		return b, nil
	}
	var dsns []string
	for attempt := 1; ; attempt++ {
		dctx, cancel := context.WithTimeout(ctx, discoverWait)
		var err error
		dsns, err = cluster.Discover(dctx, proxy, cfg.Cluster)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("COUNTERD_CLUSTER: %w", err)
		}
		if errors.Is(err, cluster.ErrNotDeclared) || errors.Is(err, cluster.ErrBadDeclaration) {
			return nil, settingError("COUNTERD_CLUSTER", err)
		}
		if attempt == 1 {
			log.Warn("waiting for the proxy database to read the cluster's partitions", "cluster", cfg.Cluster, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("COUNTERD_CLUSTER: %w", err)
		case <-time.After(discoverWait):
		}
	}
	for i, dsn := range dsns {
		pool, err := database.Open(dsn, database.Options{
			MaxConns:         cfg.DBMaxConns,
			StatementTimeout: cfg.StatementTimeout,
			LockTimeout:      cfg.LockTimeout,
		})
		if err != nil {
			b.close()
			return nil, fmt.Errorf("COUNTERD_CLUSTER %s: partition %d: %w", cfg.Cluster, i, err)
		}
		b.parts = append(b.parts, pool)
	}
	log.Info("running on a PL/Proxy cluster", "cluster", cfg.Cluster, "partitions", len(dsns))
	return b, nil
}

// store returns the store over the backend's databases; on a cluster it
// registers counterd_partition_behind for each partition on set.
func (b *backend) store(opts slots.Options, set *metrics.Set) (store.Store, error) {
	if b.parts == nil {
		return slots.New(b.proxy, opts)
	}
	parts := make([]cluster.Part, len(b.parts))
	for i, p := range b.parts {
		s, err := slots.New(p, opts)
		if err != nil {
			return nil, err
		}
		parts[i] = s
	}
	cs, err := cluster.New(parts)
	if err != nil {
		return nil, err
	}
	b.cs = cs
	for p := range b.parts {
		exposition.Gauge(set, fmt.Sprintf(`counterd_partition_behind{partition="%d"}`, p),
			"1 while the partition is behind: a round's part failed there and later rounds wait for it (their other parts commit); 0 otherwise.",
			func() float64 {
				if _, ok := cs.Behind()[p]; ok {
					return 1
				}
				return 0
			})
	}
	return cs, nil
}

// behind names the partitions behind on a round, for /readyz; "" when
// none is (or without a cluster).
func (b *backend) behind() string {
	if b.cs == nil {
		return ""
	}
	bs := b.cs.Behind()
	if len(bs) == 0 {
		return ""
	}
	ps := slices.Sorted(maps.Keys(bs))
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmt.Sprintf("partition %d (since round %d)", p, bs[p].Seq)
	}
	return strings.Join(parts, ", ")
}

// budgets returns where budgets are kept, for the run of generation.
func (b *backend) budgets(generation string) budget.Backend {
	if b.parts == nil {
		st := budget.NewStore(b.proxy)
		st.Generation = generation
		return st
	}
	parts := make([]*budget.Store, len(b.parts))
	for i, p := range b.parts {
		parts[i] = budget.NewStore(p)
		parts[i].Generation = generation
	}
	return cluster.NewBudgets(parts)
}

// migrate applies pending migrations to every database rows live in
// and, on a cluster, numbers each partition's lease ids apart and
// installs the proxy's read functions (sql/proxy/cluster.sql).
func (b *backend) migrate(ctx context.Context, log *slog.Logger) error {
	for i, pool := range b.pools() {
		plog := log
		if b.parts != nil {
			plog = log.With("partition", i)
		}
		if err := migrateUp(ctx, pool, plog); err != nil {
			return b.partErr(i, err)
		}
		if b.parts != nil {
			if err := cluster.NumberLeases(ctx, pool, i, len(b.parts)); err != nil {
				return err
			}
		}
	}
	if b.parts != nil {
		// Before the proxy's functions are installed: on a partition
		// that is the proxy they would replace the partition's own.
		if err := cluster.CheckLayout(ctx, b.proxy, b.parts); err != nil {
			err = fmt.Errorf("COUNTERD_CLUSTER: %w", err)
			if errors.Is(err, cluster.ErrBadLayout) {
				return usageError{err} // a bad declaration: exit 2
			}
			return err
		}
		missing, err := cluster.InstallProxy(ctx, b.proxy, b.cluster)
		if len(missing) > 0 {
			log.Warn("the proxy's database has no hll extension and this role may not create it: CREATE EXTENSION hll there as a superuser, then start counterd again",
				"left_out", missing)
		}
		return err
	}
	return nil
}

// partErr names partition i in err, on a cluster.
func (b *backend) partErr(i int, err error) error {
	if b.parts == nil {
		return err
	}
	return fmt.Errorf("partition %d: %w", i, err)
}

// ping checks that every database answers, naming the first that does
// not.
func (b *backend) ping(ctx context.Context) error {
	for i, pool := range b.pools() {
		if err := pool.Ping(ctx); err != nil {
			return b.partErr(i, err)
		}
	}
	return nil
}

// wait waits up to d for every database to answer.
func (b *backend) wait(ctx context.Context, d time.Duration) error {
	for i, pool := range b.pools() {
		if err := database.Wait(ctx, pool, d); err != nil {
			return b.partErr(i, err)
		}
	}
	return nil
}
