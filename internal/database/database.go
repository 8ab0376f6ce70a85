// Package database opens the pgx pool both binaries use and waits for the
// server to answer, describing failures without ever printing the URL
// (which may carry a password).
package database

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Open parses url and returns a pool of at most maxConns connections. It
// does not connect: the pool dials on first use, so a daemon can start
// while its database is down.
func Open(url string, maxConns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors can quote the URL; say only what is wrong.
		return nil, errors.New("DATABASE_URL is not a valid PostgreSQL URL or DSN")
	}
	if maxConns > 0 {
		cfg.MaxConns = int32(maxConns)
	}
	// A generic plan cached while a table was small keeps a sequential
	// scan per key as it grows, until the next ANALYZE invalidates it;
	// planning each statement for the table as it is costs far less. (The
	// write function sets this too, for any other client that calls it.)
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return pool, nil
}

// Wait pings the server until it answers, for at most wait.
func Wait(ctx context.Context, pool *pgxpool.Pool, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		pctx, cancelPing := context.WithTimeout(ctx, 5*time.Second)
		err := pool.Ping(pctx)
		cancelPing()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			c := pool.Config().ConnConfig
			return fmt.Errorf("database %s:%d/%s unreachable: %w", c.Host, c.Port, c.Database, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}
