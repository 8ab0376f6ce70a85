package slots

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/counterd/counterd/internal/store"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/change"
)

// SET, DEL and EXPIRE in the store, and COUNTERD_KEY_TTL's retention.
//
// A Set change (SET key n; DEL is SET key 0) is written like an increment,
// into one slot row of its key, but its amount is the compensation
// n - (the key's stored total as the statement's snapshot sees it), and
// its variance the same way: afterwards base plus slots sums to n. What is
// replaced is therefore everything committed when the statement ran, which
// includes every earlier round of this daemon (rounds commit in order);
// increments other daemons commit later add to n. A fold moving slot rows
// into counters meanwhile keeps the sum, so the compensation stays exact.
//
// A part with such changes, or with keys COUNTERD_KEY_TTL matches, is
// written by writeTx: several statements in one transaction, which also
// records the round's lanes, so it stays exactly once. A part of plain
// increments keeps the single statement of write.go.

// special reports whether p needs writeTx.
func (s *Store) special(p *part) bool {
	for _, c := range p.changes {
		if c.Kind == change.Set || c.Kind == change.Expire || (s.keyTTL != nil && c.Kind == change.Total && s.keyTTL(c.Key) > 0) {
			return true
		}
	}
	return false
}

// writeTx writes p (sorted by key) in one transaction: it advances the
// lanes, then, for the keys of lanes that had not seen seq, writes the
// sets, the expiries, the increments and the retention, in that order.
func (s *Store) writeTx(ctx context.Context, seq int64, p *part, grants *grantBatch, res *store.ApplyResult) (bool, error) {
	var doneAll bool
	err := s.retry(ctx, &res.Attempts, func() error {
		*res = store.ApplyResult{Attempts: res.Attempts}
		var err error
		doneAll, err = s.writeTxOnce(ctx, seq, p, grants, res)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("write batch (attempt %d): %w", res.Attempts, err)
	}
	return doneAll, nil
}

func (s *Store) writeTxOnce(ctx context.Context, seq int64, p *part, grants *grantBatch, res *store.ApplyResult) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	var fresh []bool
	if p.lanes != nil {
		if err := tx.QueryRow(ctx, advanceLanes, p.lanes, seq).Scan(&fresh); err != nil {
			return false, err
		}
	}
	var (
		sets, exps, incs, ttl batchArrays
		buckets               bucketBatch
	)
	for _, c := range p.changes {
		if fresh != nil && !fresh[c.lane-1] {
			continue
		}
		if c.Kind.Windowed() {
			buckets.add(s, laneChange{Change: c.Change, lane: 1})
			continue
		}
		switch c.Kind {
		case change.Set:
			sets.add(c.Change, s.slots)
		case change.Expire:
			exps.add(c.Change, s.slots)
		case change.Total:
			incs.add(c.Change, s.slots)
		default:
			return false, fmt.Errorf("write batch: key %q has kind %v, which this store cannot write", c.Key, c.Kind)
		}
		if c.Kind != change.Expire && s.keyTTL != nil {
			if d := s.keyTTL(c.Key); d > 0 {
				ttl.keys = append(ttl.keys, c.Key)
				ttl.vars = append(ttl.vars, d.Seconds())
			}
		}
	}
	if len(sets.keys) > 0 {
		// Remove the keys' expiries first, in a statement of its own: it
		// waits for a rollup deleting one of these keys as expired, and
		// setBatch, a new statement, then reads the total that rollup
		// left. (As a CTE of setBatch it ran on setBatch's snapshot, from
		// before the rollup's delete: SET 5 of a key holding 100 left -95.)
		if _, err := tx.Exec(ctx, unexpireBatch, sets.keys); err != nil {
			return false, fmt.Errorf("set: remove expiries: %w", err)
		}
		tag, err := tx.Exec(ctx, setBatch, sets.keys, sets.deltas, sets.vars, sets.fallback)
		if err != nil {
			return false, fmt.Errorf("set: %w", err)
		}
		res.Updated += int(tag.RowsAffected())
	}
	if len(exps.keys) > 0 || len(ttl.keys) > 0 {
		s.expiring.Store(true) // rounds from now on reset expired keys
	}
	if len(exps.keys) > 0 {
		if _, err := tx.Exec(ctx, expireBatch, exps.keys, exps.deltas); err != nil {
			return false, fmt.Errorf("expire: %w", err)
		}
	}
	if len(incs.keys) > 0 || buckets.len() > 0 {
		var u, i, done int
		args := []any{pgx.QueryExecModeCacheDescribe, nil, seq, incs.keys, incs.deltas, incs.vars, incs.fallback, incs.lanes}
		if buckets.len() > 0 {
			args = append(args, buckets.args()...)
		}
		err := tx.QueryRow(ctx, writeStatement(true, buckets.len() > 0), args...).Scan(&u, &i, &done)
		if err != nil {
			return false, err
		}
		res.Updated, res.Inserted = res.Updated+u, res.Inserted+i
	}
	if len(ttl.keys) > 0 {
		if _, err := tx.Exec(ctx, retainBatch, ttl.keys, ttl.vars); err != nil {
			return false, fmt.Errorf("key ttl: %w", err)
		}
	}
	if grants != nil {
		if err := recordGrants(ctx, tx, p.lanes, grants); err != nil {
			return false, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, err
	}
	doneAll := fresh != nil
	for _, f := range fresh {
		doneAll = doneAll && !f
	}
	return doneAll, nil
}

// batchArrays are a statement's parameters, one element per key.
type batchArrays struct {
	keys     []string
	deltas   []int64
	vars     []float64
	fallback []int16
	lanes    []int16 // all 1: writeBatch without lanes ignores them
}

func (b *batchArrays) add(c change.Change, slots int) {
	b.keys = append(b.keys, c.Key)
	b.deltas = append(b.deltas, c.Delta)
	b.vars = append(b.vars, c.Var)
	b.fallback = append(b.fallback, int16(rand.IntN(slots)))
	b.lanes = append(b.lanes, 1)
}

// advanceLanes moves the watermark of each lane in $1 to $2 where it was
// below, and says per lane whether it moved (writeBatch's advanced/fresh).
const advanceLanes = advancedCTE + `
SELECT array_agg(l.name IN (SELECT instance FROM advanced) ORDER BY l.ord)
FROM unnest($1::text[]) WITH ORDINALITY AS l(name, ord)`

// unexpireBatch removes the expiries of the keys of $1 (SET and DEL do,
// as in Redis), locking them first as the rollup's Expire and the write
// path do.
const unexpireBatch = `DELETE FROM counter_expiry WHERE key = ANY($1::text[])`

// setBatch makes each key of $1 total $2 (with variance $3): it adds the
// compensation to a free slot row, or the caller's random slot $4, as
// writeBatch adds an increment. Keys arrive sorted, handled one at a time.
const setBatch = `
INSERT INTO counter_slots AS cs (key, slot, count, variance)
SELECT b.key, coalesce(f.slot, b.fallback), b.n - cur.n, b.v - cur.v
FROM unnest($1::text[], $2::bigint[], $3::float8[], $4::smallint[]) AS b(key, n, v, fallback)
CROSS JOIN LATERAL (
    SELECT coalesce(sum(p.n), 0) AS n, coalesce(sum(p.v), 0)::float8 AS v FROM (
        SELECT c.total AS n, c.variance AS v FROM counters c WHERE c.key = b.key
        UNION ALL
        SELECT s.count, s.variance FROM counter_slots s WHERE s.key = b.key
    ) AS p
) AS cur
LEFT JOIN LATERAL (
    SELECT s.slot FROM counter_slots s
    WHERE s.key = b.key
    ORDER BY s.slot
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) AS f ON true
ON CONFLICT (key, slot) DO UPDATE
SET count = cs.count + excluded.count, variance = cs.variance + excluded.variance`

// expireBatch sets each key of $1 to expire at unix second $2 (explicit:
// idle NULL), or removes its expiry where $2 is 0 (PERSIST).
const expireBatch = `
WITH persisted AS (
    DELETE FROM counter_expiry x
    USING unnest($1::text[], $2::bigint[]) AS e(key, at)
    WHERE x.key = e.key AND e.at = 0
)
INSERT INTO counter_expiry AS x (key, expires_at, idle)
SELECT e.key, to_timestamp(e.at), NULL
FROM unnest($1::text[], $2::bigint[]) AS e(key, at)
WHERE e.at <> 0
ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at, idle = NULL`

// retainBatch moves the idle expiry (COUNTERD_KEY_TTL) of each key of $1
// to now() + $2 seconds. An explicit expiry wins until it passes (a passed
// one was removed by this transaction's writeBatch).
const retainBatch = `
INSERT INTO counter_expiry AS x (key, expires_at, idle)
SELECT t.key, now() + make_interval(secs => t.s), make_interval(secs => t.s)
FROM unnest($1::text[], $2::float8[]) AS t(key, s)
ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at, idle = excluded.idle
WHERE x.idle IS NOT NULL OR x.expires_at <= now()`

// keyTTLFunc is Options.KeyTTL.
type keyTTLFunc = func(key string) time.Duration
