package pgtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Cluster is a PL/Proxy cluster of one test: a proxy schema where the
// cluster is declared, and partition schemas it routes to, all on the
// test's server (PL/Proxy connects to each partition by its connection
// string, whose options set the partition's search_path).
type Cluster struct {
	// Proxy is the proxy's schema; its search_path also finds the
	// plproxy extension's functions.
	Proxy *DB
	// Parts are the partitions' schemas, in partition order.
	Parts []*DB
	// Name is the cluster's name (its foreign server's).
	Name string
}

// NewCluster declares a cluster of n partitions (a power of two): a
// schema per partition, migrated unless opts.NoMigrate, and a proxy
// schema (never migrated) in a database where the plproxy extension is
// created, with a PL/Proxy server of a name unique to the test and a
// user mapping for the test's user. It is all dropped when the test
// ends.
func NewCluster(tb testing.TB, n int, opts Options) *Cluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := opts.URL
	if base == "" {
		base = URL(tb)
	}
	c := &Cluster{Proxy: New(tb, Options{NoMigrate: true, URL: base, MaxConns: opts.MaxConns})}
	// The partitions are dropped after the proxy's server (cleanups run
	// last first), so PL/Proxy's connections to them are gone by then.
	c.Name = "cl_" + strings.TrimPrefix(c.Proxy.Schema, "t_")
	cfg, err := pgconn.ParseConfig(base)
	if err != nil {
		tb.Fatalf("parse TEST_DATABASE_URL: %v", err)
	}
	parts := make([]string, n)
	for i := range n {
		popts, pcfg := opts, cfg
		popts.PartURLs = nil
		if i < len(opts.PartURLs) && opts.PartURLs[i] != "" {
			popts.URL = opts.PartURLs[i]
			if pcfg, err = pgconn.ParseConfig(popts.URL); err != nil {
				tb.Fatalf("parse partition %d's URL: %v", i, err)
			}
		}
		p := New(tb, popts)
		c.Parts = append(c.Parts, p)
		parts[i] = fmt.Sprintf("p%d %s", i, quoteLiteral(fmt.Sprintf("host=%s port=%d dbname=%s options='-csearch_path=%s'",
			pcfg.Host, pcfg.Port, pcfg.Database, p.Schema)))
	}
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	defer admin.Close(ctx)
	stmts := []string{
		// One extension per database, created by the first test that
		// needs it; the lock keeps two from racing.
		`SELECT pg_advisory_lock(727274)`,
		`CREATE EXTENSION IF NOT EXISTS plproxy`,
		`SELECT pg_advisory_unlock(727274)`,
		fmt.Sprintf(`CREATE SERVER %s FOREIGN DATA WRAPPER plproxy OPTIONS (connection_lifetime '600', %s)`, c.Name, strings.Join(parts, ", ")),
		fmt.Sprintf(`CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (user %s)`, c.Name, quoteLiteral(cfg.User)),
	}
	for _, s := range stmts {
		if _, err := admin.Exec(ctx, s); err != nil {
			tb.Fatalf("declare cluster: %s: %v", s, err)
		}
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("drop cluster %s: %v", c.Name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SERVER "+c.Name+" CASCADE"); err != nil {
			tb.Errorf("drop cluster %s: %v", c.Name, err)
		}
	})
	return c
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
