package cluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/sql"
)

// proxyLock is the advisory lock two daemons installing the proxy's
// functions at once take in turn.
const proxyLock = 727275

// InstallProxy creates or replaces, in the proxy database's current
// schema, the read interface over cluster name's partitions
// (sql/proxy/cluster.sql): counter_totals, counter_top, budget_totals and
// the rest, as PL/Proxy functions over the partitions' own. name must be
// a plain identifier (the configuration checks it): it is written into
// the functions' CLUSTER statements.
func InstallProxy(ctx context.Context, pool *pgxpool.Pool, name string) error {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("cluster name %q is not a plain identifier", name)
		}
	}
	b, err := sql.Proxy.ReadFile("proxy/cluster.sql")
	if err != nil {
		return err
	}
	text := strings.ReplaceAll(string(b), ":cluster", name)
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("install the proxy's functions: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, proxyLock); err != nil {
		return fmt.Errorf("install the proxy's functions: %w", err)
	}
	if _, err := tx.Exec(ctx, text); err != nil {
		return fmt.Errorf("install the proxy's functions: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("install the proxy's functions: %w", err)
	}
	return nil
}
