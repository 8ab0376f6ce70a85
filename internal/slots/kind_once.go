package slots

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/change"
)

// INCRONCE views in the store (change.Once).
//
// counter_seen holds, per key and visitor hash, the accept time of the
// visitor's last counted view and when that entry may be pruned. A
// round's views are decided in its transaction, after its lanes moved,
// so only views of lanes this round is the first to write are decided
// (a replayed round whose lanes committed decides nothing again):
//
//  1. lockSeen upserts a row for every (key, visitor) pair of the round,
//     in sorted order, and returns what it held: the upsert locks a row
//     that exists and creates one that does not, so two daemons deciding
//     the same pair take turns, the second seeing what the first
//     committed.
//  2. Each pair's views are decided in accept-time order: a view counts
//     if there is no last counted view or it is at least its window after
//     it, and then becomes the last counted view. A view less than its
//     window after the last counted one does not move it (the window
//     slides from counted views only).
//  3. saveSeen records each pair's last counted view, and the counts go
//     into the keys' slot rows by the totals' own statement (kind_total.go),
//     so they are written exactly as INCR's, expiry included.
func init() {
	Register(Writer{Name: "once", Kinds: []change.Kind{change.Once}, Order: -1, Exec: writeOnce})
}

// onceSlack is how long after an entry's window ends the rollup still
// keeps it, so a view accepted by a daemon whose clock is behind the
// database's by less than this is still decided against it.
const onceSlack = time.Hour

// seenPair is one (key, visitor) pair of a round, with what the seen set
// says and what the round decided.
type seenPair struct {
	key     string
	visitor int64
	last    *time.Time // last counted view; nil for none
	window  int64      // µs, of the last view counted this round
	changed bool
}

func writeOnce(ctx context.Context, r *Round, cs []change.Change) error {
	views := make([]change.View, len(cs))
	for i, c := range cs {
		var ok bool
		if views[i], ok = change.OnceOf(c); !ok {
			return fmt.Errorf("once: key %q holds no counter key and visitor hash", c.Key)
		}
	}
	slices.SortFunc(views, func(a, b change.View) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Visitor, b.Visitor), cmp.Compare(a.At, b.At))
	})
	pairs, err := lockSeen(ctx, r.Tx, views)
	if err != nil {
		return err
	}
	counts := decide(views, pairs)
	if err := saveSeen(ctx, r.Tx, pairs); err != nil {
		return err
	}
	return addCounts(ctx, r, counts)
}

// lockSeen locks (creating if need be) the seen rows of the pairs of
// views (sorted), and returns the pairs in the same order.
func lockSeen(ctx context.Context, tx pgx.Tx, views []change.View) ([]seenPair, error) {
	var keys []string
	var visitors []int64
	for i, v := range views {
		if i == 0 || v.Key != views[i-1].Key || v.Visitor != views[i-1].Visitor {
			keys, visitors = append(keys, v.Key), append(visitors, v.Visitor)
		}
	}
	rows, err := tx.Query(ctx, lockSeenSQL, keys, visitors)
	if err != nil {
		return nil, fmt.Errorf("lock seen views: %w", err)
	}
	pairs := make([]seenPair, 0, len(keys))
	for rows.Next() {
		var p seenPair
		if err := rows.Scan(&p.key, &p.visitor, &p.last); err != nil {
			rows.Close()
			return nil, fmt.Errorf("lock seen views: %w", err)
		}
		pairs = append(pairs, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock seen views: %w", err)
	}
	if len(pairs) != len(keys) {
		return nil, fmt.Errorf("BUG: lock seen views: %d rows for %d pairs", len(pairs), len(keys))
	}
	return pairs, nil
}

// lockSeenSQL upserts the seen row of each pair in order ($1 and $2
// sorted), returning the last counted time it held (NULL for a new row
// or one never counted). The no-op update locks an existing row and
// makes RETURNING show it.
const lockSeenSQL = `
INSERT INTO counter_seen AS s (key, visitor_hash)
SELECT k, v FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS p(k, v, ord)
ORDER BY ord
ON CONFLICT (key, visitor_hash) DO UPDATE SET counted_at = s.counted_at
RETURNING s.key, s.visitor_hash, s.counted_at`

// decide decides views (sorted) against pairs (their pairs, sorted, as
// lockSeen returns them): it moves each pair's last counted view and
// returns how many views counted per key.
func decide(views []change.View, pairs []seenPair) map[string]int64 {
	counts := make(map[string]int64)
	p := -1
	for i, v := range views {
		if i == 0 || v.Key != views[i-1].Key || v.Visitor != views[i-1].Visitor {
			p++
		}
		pair := &pairs[p]
		at := time.UnixMicro(v.At)
		if pair.last != nil && at.Sub(*pair.last) < time.Duration(v.Window)*time.Microsecond {
			continue
		}
		pair.last, pair.window, pair.changed = &at, v.Window, true
		counts[v.Key]++
	}
	return counts
}

// saveSeen records the last counted view of each pair the round moved.
// A row lockSeen created is always among them: a pair with no counted
// view counts its first.
func saveSeen(ctx context.Context, tx pgx.Tx, pairs []seenPair) error {
	var keys []string
	var visitors, windows []int64
	var ats []time.Time
	for _, p := range pairs {
		if p.changed {
			keys, visitors = append(keys, p.key), append(visitors, p.visitor)
			ats, windows = append(ats, *p.last), append(windows, p.window)
		}
	}
	if _, err := tx.Exec(ctx, saveSeenSQL, keys, visitors, ats, windows); err != nil {
		return fmt.Errorf("save seen views: %w", err)
	}
	return nil
}

const saveSeenSQL = `
UPDATE counter_seen s
SET counted_at = u.at, keep_until = u.at + u.w * interval '1 microsecond'
FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::bigint[]) AS u(k, v, at, w)
WHERE s.key = u.k AND s.visitor_hash = u.v`

// addCounts adds each key's count to its slot rows with the totals'
// written CTE (with or without its expiry reset), as INCR's round
// statement does; every lane of these changes is fresh already.
func addCounts(ctx context.Context, r *Round, counts map[string]int64) error {
	if len(counts) == 0 {
		return nil
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := newBatchArrays(len(keys))
	for _, k := range keys {
		b.add(change.Change{Key: k, Kind: change.Total, Delta: counts[k]}, r.Slots)
	}
	expiring, err := r.store.anyExpiry(ctx)
	if err != nil {
		return err
	}
	var u, i int
	err = r.Tx.QueryRow(ctx, onceTotals(expiring), nil, b.keys, b.deltas, b.vars, b.fallback, b.lanes).Scan(&u, &i)
	if err != nil {
		return fmt.Errorf("add counted views: %w", err)
	}
	r.Result.Updated, r.Result.Inserted = r.Result.Updated+u, r.Result.Inserted+i
	return nil
}

// onceTotals is the totals' written CTE as a statement of its own: $1
// (the lanes) is NULL, so it writes every change and fresh is never read.
func onceTotals(expiring bool) string {
	text, _ := numberArrays(totalsCTE(expiring), 2)
	return `WITH fresh AS (SELECT NULL::boolean[] AS lanes), ` + text + `
SELECT count(*) FILTER (WHERE NOT created)::int, count(*) FILTER (WHERE created)::int FROM written`
}

// PruneSeen deletes, in chunks of up to chunk rows, the seen entries
// whose window ended more than an hour (onceSlack) before now: a view
// they could still stop is one accepted by a daemon whose clock is that
// far behind. It returns how many it deleted.
func (s *Store) PruneSeen(ctx context.Context, now time.Time, chunk int) (int64, error) {
	if chunk <= 0 {
		chunk = DefaultFoldChunk
	}
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, pruneSeenSQL, now.Add(-onceSlack), chunk)
		if err != nil {
			return total, fmt.Errorf("prune seen views: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(chunk) {
			return total, nil
		}
	}
}

// pruneSeenSQL deletes up to $2 entries that ended before $1, skipping
// rows a round holds.
const pruneSeenSQL = `
DELETE FROM counter_seen WHERE (key, visitor_hash) IN (
    SELECT key, visitor_hash FROM counter_seen
    WHERE keep_until < $1
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)`
