// Package pgtest gives each test its own empty, migrated PostgreSQL schema
// on the real server named by TEST_DATABASE_URL (make test starts one).
//
// Isolation is by schema, as River's riverdbtest does it: every test gets a
// fresh schema and a pool whose search_path names only that schema, so tests
// run in parallel against one server without seeing each other's rows, and a
// query that names another schema fails loudly. Production code never
// imports this package.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/migrate"
)

// URL returns TEST_DATABASE_URL, failing the test when it is not set.
func URL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		tb.Fatal("TEST_DATABASE_URL is not set: run `make test`, which starts a throwaway PostgreSQL, or point it at a server you own")
	}
	return u
}

// DB is one test's schema.
type DB struct {
	// Pool connects with search_path set to the test's schema.
	Pool *pgxpool.Pool
	// URL connects to the same schema (for child processes).
	URL string
	// Schema is the schema's name.
	Schema string
}

// Options tune New.
type Options struct {
	// NoMigrate leaves the schema empty.
	NoMigrate bool
	// MaxConns sets the pool size (default 40).
	MaxConns int32
	// URL is the server to use instead of TEST_DATABASE_URL (for
	// example a Server's URL).
	URL string
	// PartURLs, for NewCluster, are the servers of partitions by
	// partition (a Server's URL, to take one partition down); a missing
	// or empty one is URL's.
	PartURLs []string
}

// New creates an empty schema, migrates it up (unless opts.NoMigrate) and
// drops it when the test ends.
func New(tb testing.TB, opts Options) *DB {
	tb.Helper()
	// Generous: a loaded machine's commits (a migration is eleven) can
	// take seconds each.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	base := opts.URL
	if base == "" {
		base = URL(tb)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])

	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("connect to TEST_DATABASE_URL: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropSchema(ctx, base, schema); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})

	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("parse TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db := &DB{URL: u.String(), Schema: schema}

	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		tb.Fatalf("parse pool config: %v", err)
	}
	cfg.MaxConns = 40
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	db.Pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("open pool: %v", err)
	}
	tb.Cleanup(db.Pool.Close)

	if !opts.NoMigrate {
		if _, err := migrate.Up(ctx, db.Pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			tb.Fatalf("migrate: %v", err)
		}
	}
	return db
}
