package slots

import (
	"context"
	"fmt"

	"github.com/counterd/counterd/internal/change"
)

// SET and DEL in the store (change.Set).
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
// increments keeps the single round statement (writer.go).
//
// SetWriter is the Writer of SET and DEL (change.Set), one of a store's
// Options.Kinds.
func SetWriter() Writer {
	return Writer{Name: "set", Kinds: []change.Kind{change.Set}, Order: -2, Exec: writeSets}
}

// writeSets writes a round's Set changes.
func writeSets(ctx context.Context, r *Round, cs []change.Change) error {
	sets := newBatchArrays(len(cs))
	for _, c := range cs {
		sets.add(c, r.store.fallbackSlot())
	}
	// Remove the keys' expiries first, in a statement of its own: it
	// waits for a rollup deleting one of these keys as expired, and
	// setBatch, a new statement, then reads the total that rollup left.
	// (As a CTE of setBatch it ran on setBatch's snapshot, from before
	// the rollup's delete: SET 5 of a key holding 100 left -95.)
	if _, err := r.Tx.Exec(ctx, unexpireBatch, sets.keys); err != nil {
		return fmt.Errorf("remove expiries: %w", err)
	}
	tag, err := r.Tx.Exec(ctx, setBatch, sets.keys, sets.deltas, sets.vars, sets.fallback)
	if err != nil {
		return err
	}
	r.Result.Updated += int(tag.RowsAffected())
	return nil
}

// unexpireBatch takes the set locks of the keys of $1 (keyLock), then
// removes their expiries (SET and DEL do, as in Redis), locking them
// first as the rollup's Expire and the write path do.
const unexpireBatch = `
WITH keylock AS (
    SELECT count(*) AS n FROM (
        SELECT ` + keyLock + ` FROM unnest($1::text[]) WITH ORDINALITY AS u(k, ord)
    ) AS l
)
DELETE FROM counter_expiry WHERE key = ANY($1::text[]) AND (SELECT n FROM keylock) >= 0`

// keyLock and keyLockShared are a key's set lock, in SQL over the key k:
// a transaction-scoped advisory lock on (keyLockClass, hashtext(k)). A
// round deciding set operations (kind_member.go) holds its keys' locks
// shared until it commits; a SET or DEL holds them exclusive from
// before it reads their totals until it commits, so the total it
// replaces and the member rows it deletes are the same set, whatever
// other daemons decide meanwhile. Both take them in the order of their
// sorted keys, before any row lock of those keys.
const (
	keyLock       = `pg_advisory_xact_lock(` + keyLockClass + `, hashtext(k))`
	keyLockShared = `pg_advisory_xact_lock_shared(` + keyLockClass + `, hashtext(k))`
	keyLockClass  = `1668183140` // "cntd"; sql/022's counter_set_reconcile takes it shared too
)

// setBatch makes each key of $1 total $2 (with variance $3): it adds the
// compensation to a free slot row, or the caller's random slot $4, as
// the totals' round statement adds an increment. Keys arrive sorted,
// handled one at a time. A key already at n adds nothing: DEL of a key
// never counted left a slot row of 0 (and, folded, a counters row).
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
WHERE b.n <> cur.n OR b.v <> cur.v
ON CONFLICT (key, slot) DO UPDATE
SET count = cs.count + excluded.count, variance = cs.variance + excluded.variance`
