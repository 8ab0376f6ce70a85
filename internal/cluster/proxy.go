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
// (sql/proxy/cluster.sql): every function and view of docs/sql.md, and
// budget_add, as PL/Proxy functions over the partitions' own. name must be
// a plain identifier (the configuration checks it): it is written into
// the functions' CLUSTER statements.
//
// missing names what it left out: counter_unique_buckets when the proxy's
// database has no hll extension and this role may not create it (its
// sketches are of hll's type).
func InstallProxy(ctx context.Context, pool *pgxpool.Pool, name string) (missing []string, err error) {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return nil, fmt.Errorf("cluster name %q is not a plain identifier", name)
		}
	}
	b, err := sql.Proxy().ReadFile("proxy/cluster.sql")
	if err != nil {
		return nil, err
	}
	text := strings.ReplaceAll(string(b), ":cluster", name)
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("install the proxy's functions: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, proxyLock); err != nil {
		return nil, fmt.Errorf("install the proxy's functions: %w", err)
	}
	if _, err := tx.Exec(ctx, text); err != nil {
		return nil, fmt.Errorf("install the proxy's functions: %w", err)
	}
	var noHLL bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('counter_unique_buckets') IS NULL`).Scan(&noHLL); err != nil {
		return nil, fmt.Errorf("install the proxy's functions: %w", err)
	}
	if noHLL {
		missing = append(missing, "counter_unique_buckets")
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("install the proxy's functions: %w", err)
	}
	return missing, nil
}
