package slots

import (
	"context"
	"time"

	"github.com/counterd/counterd/internal/change"
)

// COUNTERD_KEY_TTL's retention: each round that writes a key's value (a
// change landing on its plain cell: an increment, a SET, a DEL) moves the
// idle expiry of a key with a TTL, after the round's increments, in its
// transaction. It is a writer of no kind that takes those changes, and
// every store has it (New).
func keyTTLWriter() Writer {
	return Writer{
		Name:  "key ttl",
		Order: 1,
		Exec:  retain,
		takes: func(s *Store, c change.Change) bool {
			return s.keyTTL != nil && c.Cell().Kind == change.Plain() && s.keyTTL(c.Key) > 0
		},
	}
}

// retain moves the idle expiry of the keys of cs.
func retain(ctx context.Context, r *Round, cs []change.Change) error {
	keys, secs := make([]string, len(cs)), make([]float64, len(cs))
	for i, c := range cs {
		keys[i], secs[i] = c.Key, r.store.keyTTL(c.Key).Seconds()
	}
	r.store.expiring.Store(true) // rounds from now on reset expired keys
	_, err := r.Tx.Exec(ctx, retainBatch, keys, secs)
	return err
}

// retainBatch moves the idle expiry (COUNTERD_KEY_TTL) of each key of $1
// to now() + $2 seconds. An explicit expiry wins until it passes (a passed
// one was removed by this transaction's round statement).
const retainBatch = `
INSERT INTO counter_expiry AS x (key, expires_at, idle)
SELECT t.key, now() + make_interval(secs => t.s), make_interval(secs => t.s)
FROM unnest($1::text[], $2::float8[]) AS t(key, s)
ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at, idle = excluded.idle
WHERE x.idle IS NOT NULL OR x.expires_at <= now()`

// keyTTLFunc is Options.KeyTTL.
type keyTTLFunc = func(key string) time.Duration
