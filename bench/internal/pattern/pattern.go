// Package pattern implements the ways an application counts in PostgreSQL
// on its own, one increment per statement or transaction, so that a
// benchmark can set them against each other and against counterd: a naive
// read-then-write, an atomic UPDATE, SELECT FOR UPDATE locking, slotted
// upserts into a random slot, SKIP LOCKED slot picking, and probabilistic
// increments. Ceiling measures the multi-row upsert that bounds what any
// batching writer, counterd included, can get out of the same server.
//
// Every pattern keeps its own table (pattern_<name>) in the schema the
// pool's search_path names, and counts keys named by package keyspace.
// Each table is created with fillfactor 70, as counterd's slot table is,
// so that updates can stay on their page.
package pattern

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Accounting says how a pattern's stored total relates to the increments
// it acknowledged.
type Accounting int

const (
	// Exact patterns store every acknowledged increment.
	Exact Accounting = iota
	// Lossy patterns may lose increments to races: the shortfall is lost
	// updates.
	Lossy
	// Estimated patterns store a random total whose expectation is the
	// true count.
	Estimated
)

// Slots is how many slot rows the slotted patterns spread one key over,
// as counterd does by default.
const Slots = 16

// SampleN is the probabilistic pattern's N: each increment writes +N with
// probability 1/N. 100 turns a key's 100 increments into about one write,
// at a relative error of about 10/sqrt(count) (one standard deviation).
const SampleN = 100

// Pattern is one way of counting.
type Pattern struct {
	// Name is the short name reports and settings use.
	Name string
	// Summary says in one line what one increment does.
	Summary string
	// Accounting says what the stored total should be.
	Accounting Accounting

	// perKey patterns update a row per key, which Setup creates.
	perKey bool
	incr   func(ctx context.Context, c *pgx.Conn, rng *rand.Rand, key string) (int64, error)
}

// All returns every pattern, in the order reports list them.
func All() []Pattern {
	return []Pattern{naive, atomic, locking, slotted, skipLocked, probabilistic}
}

// Table is the name of the pattern's table.
func (p Pattern) Table() string { return "pattern_" + p.Name }

// Setup creates the pattern's table afresh; a pattern that updates one
// row per key gets rows for the keys with indexes below keys, at zero.
func (p Pattern) Setup(ctx context.Context, pool *pgxpool.Pool, keys uint64) error {
	if p.perKey {
		return createPerKey(ctx, pool, p.Table(), keys)
	}
	ddl := fmt.Sprintf(`DROP TABLE IF EXISTS %[1]s;
CREATE TABLE %[1]s (
    key  text     NOT NULL,
    slot smallint NOT NULL,
    n    bigint   NOT NULL,
    PRIMARY KEY (key, slot)
) WITH (fillfactor = 70)`, p.Table())
	if _, err := pool.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create %s: %w", p.Table(), err)
	}
	return nil
}

// createPerKey creates table with a zero row for every key below keys,
// adding the primary key after the rows, which is faster than before.
func createPerKey(ctx context.Context, pool *pgxpool.Pool, table string, keys uint64) error {
	ddl := fmt.Sprintf(`DROP TABLE IF EXISTS %[1]s;
CREATE TABLE %[1]s (key text NOT NULL, n bigint NOT NULL) WITH (fillfactor = 70)`, table)
	if _, err := pool.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create %s: %w", table, err)
	}
	fill := fmt.Sprintf(`INSERT INTO %s (key, n) SELECT $1::text || i, 0 FROM generate_series(0, $2::bigint - 1) AS i`, table)
	if _, err := pool.Exec(ctx, fill, keyPrefix, int64(keys)); err != nil {
		return fmt.Errorf("fill %s: %w", table, err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE %[1]s ADD PRIMARY KEY (key); ANALYZE %[1]s`, table)); err != nil {
		return fmt.Errorf("index %s: %w", table, err)
	}
	return nil
}

func total(ctx context.Context, pool *pgxpool.Pool, table string) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0)::bigint FROM `+table).Scan(&n); err != nil {
		return 0, fmt.Errorf("sum %s: %w", table, err)
	}
	return n, nil
}

// acquire takes n connections from pool for clients that each keep one,
// and returns them with the function that gives them back.
func acquire(ctx context.Context, pool *pgxpool.Pool, n int) ([]*pgxpool.Conn, func(), error) {
	conns := make([]*pgxpool.Conn, 0, n)
	release := func() {
		for _, c := range conns {
			c.Release()
		}
	}
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("connect client %d: %w", len(conns), err)
		}
		conns = append(conns, c)
	}
	return conns, release, nil
}
