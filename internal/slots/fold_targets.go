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
// folded amounts as numeric text. It picks only slot rows of the keys $8,
// those whose target rows the transaction already locked (chunkWindow);
// the chunk's cursor is the window's, so it returns no last row.
var foldChunkMatching = foldChunkCTE("AND key = ANY($8::text[])") + `
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM folded),
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

// chunkWindow reads, without locking anything, the slot rows a chunk
// after $1, $2 through $3, $4 goes over (at most $5): their keys, how
// many, and the last of them.
const chunkWindow = `
WITH w AS MATERIALIZED (
    SELECT key, slot FROM counter_slots
    WHERE (key, slot) > ($1::text, $2::smallint) AND (key, slot) <= ($3::text, $4::smallint)
    ORDER BY key, slot
    LIMIT $5
)
SELECT coalesce((SELECT array_agg(DISTINCT key) FROM w), '{}'), (SELECT count(*) FROM w),
       (SELECT key FROM w ORDER BY key DESC, slot DESC LIMIT 1),
       (SELECT slot FROM w ORDER BY key DESC, slot DESC LIMIT 1)`

// foldChunkTargets is foldChunk with targets: one transaction folds the
// chunk into counters and adds each matching key's amount to its
// target's column, one UPDATE per target, so a crash or an error at any
// point leaves both as they were. It first reads the chunk's keys and
// locks their target rows, and only then picks (locks) and deletes slot
// rows, of those keys only: a fold waiting for the app's lock on a row
// (a transaction of the app's, a LOCK TABLE) holds no slot row, which a
// writer of the key might need (when every slot row of a key is held, a
// write adds to one of them and waits for it).
//
// The chunk goes over the window of slot rows it read first, and its
// cursor moves past the window's last row: rows of the window another
// transaction holds are left for the next pass, as the fold's SKIP
// LOCKED leaves them, and a key written into the window since is not
// picked (its target row is not locked).
func (s *Store) foldChunkTargets(ctx context.Context, cur, end position, n int, stamp *time.Time, set *targets.Set) (c chunkResult, lastKey *string, lastSlot *int16, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		c = chunkResult{}
		var window []string
		if err := tx.QueryRow(ctx, chunkWindow, cur.key, cur.slot, end.key, end.slot, n).
			Scan(&window, &c.swept, &lastKey, &lastSlot); err != nil {
			return err
		}
		if c.swept == 0 {
			return nil
		}
		matched := matchTargets(set, window)
		if err := lockTargets(ctx, tx, set, matched); err != nil {
			return err
		}
		var keys, amounts []string
		err := tx.QueryRow(ctx, foldChunkMatching, cur.key, cur.slot, *lastKey, *lastSlot, n, stamp, set.Prefixes(), window).
			Scan(&c.rows, &c.keys, &keys, &amounts)
		if err != nil {
			return err
		}
		batches := make(map[*targets.Target]*targetBatch)
		for i, key := range keys {
			m, ok := matched[key] // every key picked is the window's
			if !ok {
				continue
			}
			b := batches[m.target]
			if b == nil {
				b = &targetBatch{}
				batches[m.target] = b
			}
			if !m.ok {
				b.unparsed = append(b.unparsed, key)
				continue
			}
			b.keys = append(b.keys, key)
			b.ids = append(b.ids, m.id)
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

// targetMatch is a key's target and the row id in it (ok false for a
// key whose id does not parse).
type targetMatch struct {
	target *targets.Target
	id     string
	ok     bool
}

// matchTargets matches keys against set, once a chunk: lockTargets and
// the updates use the same matches.
func matchTargets(set *targets.Set, keys []string) map[string]targetMatch {
	matched := make(map[string]targetMatch)
	for _, key := range keys {
		t, raw, ok := set.Match(key)
		if !ok {
			continue
		}
		id, ok := t.ID(raw)
		matched[key] = targetMatch{t, id, ok}
	}
	return matched
}

// lockTargets locks the target rows of the matched keys, target by
// target in configuration order (the order the updates take them in).
func lockTargets(ctx context.Context, tx pgx.Tx, set *targets.Set, matched map[string]targetMatch) error {
	ids := make(map[*targets.Target][]string)
	for _, m := range matched {
		if m.ok {
			ids[m.target] = append(ids[m.target], m.id)
		}
	}
	for _, t := range set.Targets() {
		if len(ids[t]) == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, t.LockSQL(), ids[t]); err != nil {
			return &TargetError{t.String(), err}
		}
	}
	return nil
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
