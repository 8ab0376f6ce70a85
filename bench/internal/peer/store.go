package peer

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Table holds the pattern's totals, one row per key, in the schema the
// connection's search_path names.
const Table = "peer_counts"

// upsert is the worker's one statement per move, as the pattern writes
// it.
const upsert = `INSERT INTO ` + Table + ` AS t (key, total)
SELECT unnest($1::text[]), unnest($2::bigint[])
ON CONFLICT (key) DO UPDATE SET total = t.total + excluded.total`

// CreateTable creates Table unless it exists.
func CreateTable(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+Table+` (key text PRIMARY KEY, total bigint NOT NULL)`)
	return err
}

// Total sums Table.
func Total(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	err := pool.QueryRow(ctx, `SELECT coalesce(sum(total), 0)::bigint FROM `+Table).Scan(&n)
	return n, err
}

// PGStore is a Store on one connection. Each Add is one statement, so
// one transaction.
type PGStore struct{ Conn *pgx.Conn }

// Add implements Store.
func (s PGStore) Add(ctx context.Context, keys []string, deltas []int64) error {
	_, err := s.Conn.Exec(ctx, upsert, keys, deltas)
	return err
}
