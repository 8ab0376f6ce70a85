package slots

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/targets"
)

// foldChunkMatching is foldChunk that also returns, in key order, the
// keys it folded that start with a target's prefix ($7), and their
// folded amounts as numeric text.
const foldChunkMatching = foldChunkCTE + `
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM folded),
       (SELECT key FROM last), (SELECT slot FROM last),
       (SELECT array_agg(key ORDER BY key) FROM sums WHERE key ^@ ANY($7::text[])),
       (SELECT array_agg(n::text ORDER BY key) FROM sums WHERE key ^@ ANY($7::text[]))`

// TargetError is a target's update failing, for example because the sum
// is past the range of the column's type (SQLSTATE 22003, a data error:
// the slot row at fault is skipped as a RowError and every other key
// folds; it folds once the column is widened).
type TargetError struct {
	Target string // pattern=table.column
	Err    error
}

func (e *TargetError) Error() string { return fmt.Sprintf("target %s: %v", e.Target, e.Err) }

func (e *TargetError) Unwrap() error { return e.Err }

// missing is a chunk's keys of one target that named no row.
type missing struct {
	target *targets.Target
	keys   []string
}

// targetBatch is one target's share of a chunk, in key order.
type targetBatch struct {
	keys, ids, amounts []string
	unparsed           []string // keys whose id does not parse
}

// foldChunkTargets is foldChunk with targets: one transaction folds the
// chunk into counters and adds each matching key's amount to its
// target's column, one UPDATE per target, so a crash or an error at any
// point leaves both as they were.
func (s *Store) foldChunkTargets(ctx context.Context, cur, end position, n int, stamp *time.Time, set *targets.Set) (c chunkResult, lastKey *string, lastSlot *int16, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		c = chunkResult{}
		var keys, amounts []string
		err := tx.QueryRow(ctx, foldChunkMatching, cur.key, cur.slot, end.key, end.slot, n, stamp, set.Prefixes()).
			Scan(&c.rows, &c.keys, &lastKey, &lastSlot, &keys, &amounts)
		if err != nil {
			return err
		}
		batches := make(map[*targets.Target]*targetBatch)
		for i, key := range keys {
			t, raw, ok := set.Match(key)
			if !ok {
				continue
			}
			b := batches[t]
			if b == nil {
				b = &targetBatch{}
				batches[t] = b
			}
			id, ok := t.ID(raw)
			if !ok {
				b.unparsed = append(b.unparsed, key)
				continue
			}
			b.keys = append(b.keys, key)
			b.ids = append(b.ids, id)
			b.amounts = append(b.amounts, amounts[i])
		}
		// Configuration order, the same in every chunk, so two folds lock
		// the tables in one order.
		for _, t := range set.Targets() {
			b := batches[t]
			if b == nil {
				continue
			}
			m := missing{target: t, keys: b.unparsed}
			if len(b.ids) > 0 {
				gone, err := updateTarget(ctx, tx, t, b)
				if err != nil {
					return err
				}
				m.keys = append(m.keys, gone...)
			}
			if len(m.keys) > 0 {
				c.missing = append(c.missing, m)
			}
		}
		return nil
	})
	return c, lastKey, lastSlot, err
}

// updateTarget adds b's amounts to t's column and returns the keys whose
// row does not exist.
func updateTarget(ctx context.Context, tx pgx.Tx, t *targets.Target, b *targetBatch) ([]string, error) {
	rows, err := tx.Query(ctx, t.UpdateSQL(), b.ids, b.amounts)
	if err != nil {
		return nil, &TargetError{t.String(), err}
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, &TargetError{t.String(), err}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	byID := make(map[string]string, len(b.ids))
	for i, id := range b.ids {
		byID[id] = b.keys[i]
	}
	keys := make([]string, 0, len(gone))
	for _, id := range gone {
		keys = append(keys, byID[id])
	}
	return keys, nil
}
