package slots

import (
	"context"
	"fmt"
	"time"
)

// DefaultFoldChunk is how many slot rows one fold transaction moves.
const DefaultFoldChunk = 5000

// FoldResult says what a fold pass moved.
type FoldResult struct {
	// Rows is how many slot rows were folded and deleted.
	Rows int64
	// Keys is how many base rows were created or updated.
	Keys int64
	// Chunks is how many transactions the pass took.
	Chunks int
}

// Fold moves slot counts into the base table, chunk rows per transaction,
// until a chunk finds fewer than chunk free rows. Each chunk deletes its
// slot rows and adds their sums to the base rows in one transaction, so an
// increment is moved exactly once. Rows a writer holds are skipped and left
// for the next pass, so a fold never waits on writers. now stamps
// updated_at (the zero time means the database's now()).
func (s *Store) Fold(ctx context.Context, chunk int, now time.Time) (FoldResult, error) {
	var res FoldResult
	if chunk <= 0 {
		chunk = DefaultFoldChunk
	}
	var ts *time.Time
	if !now.IsZero() {
		ts = &now
	}
	for {
		var rows, keys int64
		attempts := 0
		err := s.retry(ctx, &attempts, func() error {
			return s.pool.QueryRow(ctx, foldChunk, chunk, ts).Scan(&rows, &keys)
		})
		if err != nil {
			return res, fmt.Errorf("fold chunk %d: %w", res.Chunks+1, err)
		}
		res.Chunks++
		res.Rows += rows
		res.Keys += keys
		if rows < int64(chunk) {
			return res, nil
		}
	}
}

// foldChunk moves up to $1 unheld slot rows into counters.
const foldChunk = `
WITH picked AS MATERIALIZED (
    SELECT key, slot FROM counter_slots
    ORDER BY key, slot
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM counter_slots cs
    USING picked p
    WHERE cs.key = p.key AND cs.slot = p.slot
    RETURNING cs.key, cs.count, cs.variance
), sums AS (
    SELECT key, sum(count) AS n, sum(variance) AS v FROM moved GROUP BY key
), folded AS (
    INSERT INTO counters AS c (key, total, variance, updated_at)
    SELECT key, n, v, coalesce($2::timestamptz, now()) FROM sums ORDER BY key
    ON CONFLICT (key) DO UPDATE
    SET total = c.total + excluded.total, variance = c.variance + excluded.variance,
        updated_at = excluded.updated_at
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM folded)`
