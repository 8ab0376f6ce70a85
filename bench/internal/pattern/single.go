package pattern

import (
	"context"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/bench/keyspace"
)

const keyPrefix = keyspace.Prefix

// naive reads the count and writes back one more in a separate statement:
// two clients that read the same value both write value+1, and one
// increment is lost.
var naive = Pattern{
	Name:       "naive",
	Summary:    "SELECT n, then UPDATE SET n = read+1 in a second statement (loses updates under concurrency)",
	Accounting: Lossy,
	perKey:     true,
	incr: func(ctx context.Context, c *pgx.Conn, _ *rand.Rand, key string) (int64, error) {
		var n int64
		if err := c.QueryRow(ctx, `SELECT n FROM pattern_naive WHERE key = $1`, key).Scan(&n); err != nil {
			return 0, err
		}
		tag, err := c.Exec(ctx, `UPDATE pattern_naive SET n = $2 WHERE key = $1`, key, n+1)
		return tag.RowsAffected(), err
	},
}

// atomic lets the server add: exact, but every writer of a key queues on
// its one row lock until the holder commits.
var atomic = Pattern{
	Name:    "atomic",
	Summary: "UPDATE SET n = n + 1 on the key's one row",
	perKey:  true,
	incr: func(ctx context.Context, c *pgx.Conn, _ *rand.Rand, key string) (int64, error) {
		tag, err := c.Exec(ctx, `UPDATE pattern_atomic SET n = n + 1 WHERE key = $1`, key)
		return tag.RowsAffected(), err
	},
}

// locking is the textbook read-modify-write: the row lock is held for four
// round trips instead of one.
var locking = Pattern{
	Name:    "locking",
	Summary: "BEGIN; SELECT n FOR UPDATE; UPDATE SET n = read+1; COMMIT",
	perKey:  true,
	incr: func(ctx context.Context, c *pgx.Conn, _ *rand.Rand, key string) (int64, error) {
		tx, err := c.Begin(ctx)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback(ctx)
		var n int64
		if err := tx.QueryRow(ctx, `SELECT n FROM pattern_locking WHERE key = $1 FOR UPDATE`, key).Scan(&n); err != nil {
			return 0, err
		}
		tag, err := tx.Exec(ctx, `UPDATE pattern_locking SET n = $2 WHERE key = $1`, key, n+1)
		if err != nil {
			return 0, err
		}
		return tag.RowsAffected(), tx.Commit(ctx)
	},
}

// probabilistic writes +N with probability 1/N and nothing otherwise: an
// unbiased estimate for a hundredth of the writes.
var probabilistic = Pattern{
	Name:       "probabilistic",
	Summary:    "with probability 1/100, UPDATE SET n = n + 100; otherwise nothing",
	Accounting: Estimated,
	perKey:     true,
	incr: func(ctx context.Context, c *pgx.Conn, rng *rand.Rand, key string) (int64, error) {
		if rng.IntN(SampleN) != 0 {
			return 0, nil
		}
		tag, err := c.Exec(ctx, `UPDATE pattern_probabilistic SET n = n + $2 WHERE key = $1`, key, int64(SampleN))
		return tag.RowsAffected(), err
	},
}
