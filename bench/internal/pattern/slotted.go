package pattern

import (
	"context"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"
)

// slotted spreads a key over Slots rows and adds to a random one, so
// concurrent writers of one key mostly take different row locks.
var slotted = Pattern{
	Name:    "slotted",
	Summary: "INSERT (key, random slot of 16, 1) ON CONFLICT (key, slot) DO UPDATE SET n = n + 1",
	incr: func(ctx context.Context, c *pgx.Conn, rng *rand.Rand, key string) (int64, error) {
		tag, err := c.Exec(ctx, `INSERT INTO pattern_slotted AS s (key, slot, n) VALUES ($1, $2, 1)
ON CONFLICT (key, slot) DO UPDATE SET n = s.n + 1`, key, int16(rng.IntN(Slots)))
		return tag.RowsAffected(), err
	},
}

// skipLockedSQL adds to a slot row no other transaction holds, starting
// the search at a random slot so writers do not all probe slot 0 first;
// when every existing slot row is held, or the key has none, it upserts
// into the random slot as slotted does. One statement, one round trip.
const skipLockedSQL = `WITH picked AS (
    SELECT slot FROM pattern_skiplocked
    WHERE key = $1::text
    ORDER BY (slot + 16 - $2::smallint) % 16
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), updated AS (
    UPDATE pattern_skiplocked AS s SET n = s.n + 1
    FROM picked
    WHERE s.key = $1::text AND s.slot = picked.slot
    RETURNING 1
), inserted AS (
    INSERT INTO pattern_skiplocked AS s (key, slot, n)
    SELECT $1::text, $2::smallint, 1
    WHERE NOT EXISTS (SELECT FROM updated)
    ON CONFLICT (key, slot) DO UPDATE SET n = s.n + 1
    RETURNING 1
)
SELECT (SELECT count(*) FROM updated) + (SELECT count(*) FROM inserted)`

var skipLocked = Pattern{
	Name:    "skiplocked",
	Summary: "one statement: UPDATE the first slot row FOR UPDATE SKIP LOCKED finds, else the slotted upsert",
	incr: func(ctx context.Context, c *pgx.Conn, rng *rand.Rand, key string) (int64, error) {
		var rows int64
		err := c.QueryRow(ctx, skipLockedSQL, key, int16(rng.IntN(Slots))).Scan(&rows)
		return rows, err
	},
}
