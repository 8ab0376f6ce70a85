package slots

import (
	"context"

	"github.com/counterd/counterd/internal/change"
)

// EXPIRE, EXPIREAT and PERSIST in the store (change.Expire): a round's
// expiries are written before its increments, in its transaction. How an
// expiry takes effect is in expire.go.
//
// ExpireWriter is the Writer of EXPIRE, EXPIREAT and PERSIST
// (change.Expire), one of a store's Options.Kinds.
func ExpireWriter() Writer {
	return Writer{Name: "expire", Kinds: []change.Kind{change.Expire}, Order: -1, Exec: writeExpiries}
}

// writeExpiries writes a round's Expire changes.
func writeExpiries(ctx context.Context, r *Round, cs []change.Change) error {
	keys, at := make([]string, len(cs)), make([]int64, len(cs))
	for i, c := range cs {
		keys[i], at[i] = c.Key, c.Delta
	}
	r.store.expiring.Store(true) // rounds from now on reset expired keys
	_, err := r.Tx.Exec(ctx, expireBatch, keys, at)
	return err
}

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
