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
//     slides from counted views only). A view accepted before the last
//     counted one (decided late: its daemon replayed its journal after
//     others counted later views) is decided by decideLate, against the
//     last counted view and the one before it (counted_before).
//  3. saveSeen records each pair's last counted view, and the counts go
//     into the keys' slot rows by the totals' own statement (kind_total.go),
//     so they are written exactly as INCR's, expiry included.
//
// A round's views are taken in pieces of at most the statement bound
// (bound.go), in the same sorted order, a pair's views in one piece but
// for a pair with more than half a piece of them (the next piece then
// sees what the first saved: the same transaction): every statement is
// bounded, and rows are still locked in sorted order.
//
// OnceWriter is the Writer of INCRONCE (change.Once), with its rollup
// pruning, one of a store's Options.Kinds.
func OnceWriter() Writer {
	return Writer{Name: "once", Kinds: []change.Kind{change.Once}, Order: -1, Exec: writeOnce, whole: true,
		rollup: rollupPart{prune: pruneSeen, pruned: "pruned_seen"}}
}

// seenPair is one (key, visitor) pair of a round, with what the seen set
// says and what the round decided.
type seenPair struct {
	key     string
	visitor int64
	last    *time.Time // last counted view; nil for none
	before  *time.Time // the counted view before last; nil for none known
	window  int64      // µs, of the last view counted this round; -1: last not moved
	changed bool
}

func writeOnce(ctx context.Context, r *Round, cs []change.Change) error {
	views := make([]change.View, len(cs))
	for i, c := range cs {
		var err error
		if views[i], err = change.OnceOf(c); err != nil {
			return err
		}
	}
	slices.SortFunc(views, func(a, b change.View) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Visitor, b.Visitor), cmp.Compare(a.At, b.At),
			cmp.Compare(a.Window, b.Window)) // a total order: the same decisions whatever order the round came in
	})
	samePair := func(i int) bool { return views[i].Key == views[i-1].Key && views[i].Visitor == views[i-1].Visitor }
	return pieces(len(views), r.store.rows, samePair, func(lo, hi int) error {
		pairs, err := lockSeen(ctx, r.Tx, views[lo:hi])
		if err != nil {
			return err
		}
		counted := decide(views[lo:hi], pairs)
		if err := saveSeen(ctx, r.Tx, pairs); err != nil {
			return err
		}
		ds := make([]decided, len(counted))
		for i, v := range counted {
			ds[i] = decided{key: v.Key, at: v.At, delta: 1}
		}
		return addDecided(ctx, r, ds, "counted views")
	})
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
		p := seenPair{window: -1}
		if err := rows.Scan(&p.key, &p.visitor, &p.last, &p.before); err != nil {
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
RETURNING s.key, s.visitor_hash, s.counted_at, s.counted_before`

// decide decides views (sorted) against pairs (their pairs, sorted, as
// lockSeen returns them): it moves each pair's last counted view and
// returns the views that counted.
func decide(views []change.View, pairs []seenPair) []change.View {
	var counted []change.View
	p := -1
	for i, v := range views {
		if i == 0 || v.Key != views[i-1].Key || v.Visitor != views[i-1].Visitor {
			p++
		}
		pair := &pairs[p]
		at := time.UnixMicro(v.At)
		window := time.Duration(v.Window) * time.Microsecond
		switch {
		case pair.last == nil || !at.Before(*pair.last):
			if pair.last != nil && at.Sub(*pair.last) < window {
				continue
			}
			pair.before, pair.last, pair.window = pair.last, &at, v.Window
		case !decideLate(pair, at, window):
			continue
		}
		pair.changed = true
		counted = append(counted, v)
	}
	return counted
}

// decideLate decides a view accepted at at, before the pair's last
// counted view, and reports whether it counts; one that counts becomes
// the counted view before last. In accept-time order it would have been
// decided before the last: it counts if neither the last nor the one
// before it is within its window of it. A view within its window of the
// last does not count (the last did instead: the total is the same). A
// view before the counted view before last cannot be decided from the
// two kept: it counts only if that view is within its window (then the
// total is the same whichever counted) — it does not, and it is not
// counted, erring low (docs/protocol.md, Once per visitor).
func decideLate(pair *seenPair, at time.Time, window time.Duration) bool {
	if pair.last.Sub(at) < window {
		return false
	}
	if pair.before != nil {
		if at.Before(*pair.before) {
			return false
		}
		if at.Sub(*pair.before) < window {
			return false
		}
	}
	pair.before = &at
	return true
}

// saveSeen records the last counted view of each pair the round moved.
// A row lockSeen created is always among them: a pair with no counted
// view counts its first.
func saveSeen(ctx context.Context, tx pgx.Tx, pairs []seenPair) error {
	var keys []string
	var visitors, windows []int64
	var ats []time.Time
	var befores []*time.Time
	for _, p := range pairs {
		if p.changed {
			keys, visitors = append(keys, p.key), append(visitors, p.visitor)
			ats, windows, befores = append(ats, *p.last), append(windows, p.window), append(befores, p.before)
		}
	}
	if _, err := tx.Exec(ctx, saveSeenSQL, keys, visitors, ats, windows, befores); err != nil {
		return fmt.Errorf("save seen views: %w", err)
	}
	return nil
}

const saveSeenSQL = `
UPDATE counter_seen s
SET counted_at = u.at, counted_before = u.before,
    keep_until = CASE WHEN u.w < 0 THEN s.keep_until ELSE u.at + u.w * interval '1 microsecond' END
FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::bigint[], $5::timestamptz[]) AS u(k, v, at, w, before)
WHERE s.key = u.k AND s.visitor_hash = u.v`

// PruneSeen deletes, in chunks of up to chunk rows, the seen entries
// whose window ended before before (the rollup passes now less
// ROLLUP_SEEN_SLACK): a view they could still stop is one decided that
// late, by a daemon whose clock is behind or that replays its journal
// after an outage. It returns how many it deleted.
func (s *Store) PruneSeen(ctx context.Context, before time.Time, chunk int) (int64, error) {
	if chunk <= 0 {
		chunk = DefaultFoldChunk
	}
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, pruneSeenSQL, before, chunk)
		if err != nil {
			return total, fmt.Errorf("prune seen views: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(chunk) {
			return total, nil
		}
	}
}

// pruneSeen is the rollup's pruning of seen entries: those whose window
// ended opts.Slack (ROLLUP_SEEN_SLACK) before now.
func pruneSeen(s *Store, ctx context.Context, opts PruneOptions) (int64, error) {
	return s.PruneSeen(ctx, time.Now().Add(-opts.Slack), opts.Chunk)
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
