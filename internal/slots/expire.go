package slots

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Expiry. A key whose counter_expiry row has passed reads as 0 (read.go);
// its stored rows are removed by whichever comes first:
//   - the next write of the key (resetExpired, in the round statement): the write
//     deletes the expiry row and adds minus the stored total to the slot
//     row it writes, so the round's delta starts the key's new life;
//   - the rollup (Expire): it deletes the expired keys' slot rows, base
//     rows and expiry rows in bounded chunks.
// Both lock the expiry row first (the write by deleting it, the rollup
// FOR UPDATE SKIP LOCKED), so only one of them resets a given expiry; a
// write waiting on the rollup finds the row gone and adds its delta to
// nothing. They may deadlock on slot rows, and both retry.

// resetExpired is the CTEs the totals' written CTE takes expired keys
// from (kind_total.go), over the totals' keys and lanes parameters:
// expired deletes the expiry rows of the round's keys whose expiry
// passed, reset holds their stored totals (as the statement's snapshot
// sees them) to subtract; only keys of lanes this statement writes, since
// the subtraction goes with the key's delta.
func resetExpired(keys, lanes string) string {
	return `expired AS (
    DELETE FROM counter_expiry x
    USING unnest(` + keys + `, ` + lanes + `) AS b(key, lane)
    WHERE x.key = b.key AND x.expires_at <= now()
      AND (` + lanesParam + ` IS NULL OR (SELECT lanes FROM fresh)[b.lane])
    RETURNING x.key
), reset AS (
    SELECT x.key, t.n, t.v FROM expired x
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(p.n), 0) AS n, coalesce(sum(p.v), 0)::float8 AS v FROM (
            SELECT c.total AS n, c.variance AS v FROM counters c WHERE c.key = x.key
            UNION ALL
            SELECT s.count, s.variance FROM counter_slots s WHERE s.key = x.key
        ) AS p
    ) AS t
)`
}

// anyExpiry reports whether any key has an expiry. While counter_expiry
// is empty rounds use the statements without resetExpired, so a
// deployment that never uses expiry pays one index-only lookup per
// transaction and nothing per key. A key whose first expiry is committed,
// already passed, between this check and the write is reset by its next
// write instead.
//
// Once it has seen an expiry, or this store wrote one, it answers true
// without asking again: the check costs nothing more, and the window
// does not reopen each time the rollup empties the table.
func (s *Store) anyExpiry(ctx context.Context) (bool, error) {
	if s.expiring.Load() {
		return true, nil
	}
	var any bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM counter_expiry)`).Scan(&any); err != nil {
		return false, fmt.Errorf("check for expiries: %w", err)
	}
	if any {
		s.expiring.Store(true)
	}
	return any, nil
}

// DefaultExpireChunk is how many expired keys one rollup transaction
// deletes.
const DefaultExpireChunk = 1000

// ExpireOptions tune one expiry pass.
type ExpireOptions struct {
	// Chunk is how many keys one transaction deletes (default
	// DefaultExpireChunk).
	Chunk int
	// Now is the time keys are expired as of; the zero time means the
	// database's now().
	Now time.Time
	// MaxDuration, when positive, ends the pass once it has run this
	// long, leaving the rest for the next pass.
	MaxDuration time.Duration
}

// ExpireResult says what an expiry pass deleted.
type ExpireResult struct {
	// Keys is how many expired keys were deleted.
	Keys int64
	// Chunks is how many transactions committed.
	Chunks int
	// Limited says MaxDuration ended the pass.
	Limited bool
}

// Expire deletes keys whose expiry has passed: each chunk locks up to
// Chunk expired expiry rows nobody else holds, in key order, and deletes
// those keys' slot rows, base rows and expiry rows in one transaction. A
// key a writer is resetting at the same moment is skipped, since the
// writer does the same.
func (s *Store) Expire(ctx context.Context, opts ExpireOptions) (ExpireResult, error) {
	var res ExpireResult
	chunk := opts.Chunk
	if chunk <= 0 {
		chunk = DefaultExpireChunk
	}
	var now *time.Time
	if !opts.Now.IsZero() {
		now = &opts.Now
	}
	start := time.Now()
	for {
		if res.Chunks > 0 && opts.MaxDuration > 0 && time.Since(start) >= opts.MaxDuration {
			res.Limited = true
			return res, nil
		}
		var (
			n        int64
			attempts int
		)
		err := s.retry(ctx, &attempts, func() (err error) {
			n, err = s.expireChunk(ctx, now, chunk)
			return err
		})
		if err != nil {
			return res, fmt.Errorf("expire chunk %d (attempt %d): %w", res.Chunks+1, attempts, err)
		}
		if n == 0 {
			return res, nil
		}
		res.Keys += n
		res.Chunks++
		if n < int64(chunk) {
			return res, nil
		}
	}
}

// expireChunk deletes up to n expired keys in one transaction.
func (s *Store) expireChunk(ctx context.Context, now *time.Time, n int) (int64, error) {
	var deleted int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var keys []string
		if err := tx.QueryRow(ctx, lockExpired, now, n).Scan(&keys); err != nil {
			return err
		}
		for _, w := range s.ws.list {
			if w.rollup.expireKeys == nil || len(keys) == 0 {
				continue
			}
			var err error
			if keys, err = w.rollup.expireKeys(ctx, tx, keys); err != nil {
				return err
			}
		}
		if len(keys) == 0 {
			return nil
		}
		// Separate statements: each sees what committed before it, so a
		// base row a fold created after the slot rows were deleted is
		// deleted too.
		for _, q := range []string{
			`DELETE FROM counter_slots WHERE key = ANY($1::text[])`,
			`DELETE FROM counters WHERE key = ANY($1::text[])`,
		} {
			if _, err := tx.Exec(ctx, q, keys); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM counter_expiry WHERE key = ANY($1::text[])`, keys)
		deleted = tag.RowsAffected()
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return deleted, err
}

// lockExpired locks up to $2 expiry rows that passed at $1 (default
// now()) and no one else holds, in key order.
const lockExpired = `
SELECT coalesce(array_agg(key ORDER BY key), '{}') FROM (
    SELECT key FROM counter_expiry
    WHERE expires_at <= coalesce($1::timestamptz, now())
    ORDER BY key
    LIMIT $2
    FOR UPDATE SKIP LOCKED
) AS k`
