// Package tickets implements seed 004's ways of drawing one owner's
// tickets concurrently, in order, so that a benchmark can set them side by
// side: select-then-update ORDER BY id with retries, ORDER BY random(),
// and the single statement UPDATE ... WHERE id = (SELECT ... ORDER BY id
// LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id. A Redis list is the
// seed's fourth answer; it needs a server, so the benchmark builds its
// Draw itself and Run measures it the same way.
//
// The one idea to read first: a draw either returns a ticket id or
// nothing, and nothing while the owner still has tickets is a failure.
// Run counts draws, retries and failures, and checks that no ticket was
// drawn twice and that the table marks exactly the tickets drawn.
package tickets

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Table holds the tickets.
const Table = "seed_tickets"

// MaxRetries is how often the ordered draw retries before it gives up:
// far more than concurrent draws ever collide in a benchmark, so giving
// up means something is wrong.
const MaxRetries = 1000

// Draw draws one ticket: its id, or 0 when it got none, and the retries
// it took. Each client has its own Draw and calls it from one goroutine.
type Draw func(ctx context.Context) (id, retries int64, err error)

// Approach is one way of drawing.
type Approach struct {
	// Name is the short name reports and settings use.
	Name string
	// Summary says in one line what one draw does.
	Summary string

	draw func(ctx context.Context, c *pgx.Conn, owner int64) (int64, int64, error)
}

var (
	// Ordered selects the owner's first ticket, then marks it drawn if
	// it still is undrawn, and retries from the select when another draw
	// got there first.
	Ordered = Approach{Name: "order-by-id", Summary: fmt.Sprintf("`SELECT id ... WHERE owner = $1 AND remain = 1 ORDER BY id LIMIT 1`, then `UPDATE ... SET remain = 0 WHERE id = $2 AND remain = 1`; when that updates nothing, another draw got the ticket: retry (up to %d times)", MaxRetries), draw: drawOrdered}
	// Random picks any undrawn ticket of the owner and does not retry:
	// a collision is a failed draw, and tickets go out of order.
	Random = Approach{Name: "order-by-random", Summary: "the same with `ORDER BY random()` and no retry: a collision is a failed draw, and tickets are not drawn in order", draw: drawRandom}
	// SkipLocked is one statement that skips the tickets other draws
	// hold and takes the first free one.
	SkipLocked = Approach{Name: "skip-locked", Summary: "`UPDATE ... SET remain = 0 WHERE id = (SELECT id ... WHERE owner = $1 AND remain = 1 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id`, one statement, no retry", draw: drawSkipLocked}
)

// SQL returns the approaches that need only PostgreSQL, in report order.
func SQL() []Approach { return []Approach{Ordered, Random, SkipLocked} }

// Drawer returns a Draw of owner's tickets on c.
func (a Approach) Drawer(c *pgx.Conn, owner int64) Draw {
	return func(ctx context.Context) (int64, int64, error) { return a.draw(ctx, c, owner) }
}

// Setup creates Table unless it exists.
func Setup(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+Table+` (
    id     bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner  bigint   NOT NULL,
    remain smallint NOT NULL DEFAULT 1 CHECK (remain IN (0, 1))
);
CREATE INDEX IF NOT EXISTS `+Table+`_undrawn ON `+Table+` (owner, id) WHERE remain = 1`)
	if err != nil {
		return fmt.Errorf("create %s: %w", Table, err)
	}
	return nil
}

// Fill gives owner n undrawn tickets, replacing any it had, interleaved
// with as many tickets of another owner (owner+1's are replaced too) so
// that one owner's ids are not one contiguous run.
func Fill(ctx context.Context, pool *pgxpool.Pool, owner int64, n int) error {
	_, err := pool.Exec(ctx, `DELETE FROM `+Table+` WHERE owner IN ($1::bigint, $1::bigint + 1)`, owner)
	if err != nil {
		return fmt.Errorf("empty tickets of %d: %w", owner, err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO `+Table+` (owner) SELECT $1::bigint + i % 2 FROM generate_series(0, 2 * $2::bigint - 1) AS i ORDER BY i`, owner, n)
	if err != nil {
		return fmt.Errorf("fill tickets of %d: %w", owner, err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+Table); err != nil {
		return fmt.Errorf("analyze %s: %w", Table, err)
	}
	return nil
}

// Undrawn returns owner's tickets that are not drawn, in id order.
func Undrawn(ctx context.Context, pool *pgxpool.Pool, owner int64) ([]int64, error) {
	rows, err := pool.Query(ctx, `SELECT id FROM `+Table+` WHERE owner = $1 AND remain = 1 ORDER BY id`, owner)
	if err != nil {
		return nil, fmt.Errorf("list tickets of %d: %w", owner, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list tickets of %d: %w", owner, err)
	}
	return ids, nil
}

// Left counts owner's undrawn tickets.
func Left(ctx context.Context, pool *pgxpool.Pool, owner int64) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+Table+` WHERE owner = $1 AND remain = 1`, owner).Scan(&n); err != nil {
		return 0, fmt.Errorf("count tickets of %d: %w", owner, err)
	}
	return n, nil
}

// Mark marks ticket id drawn if it was not, and reports whether it did:
// the database half of a draw whose id came from elsewhere (a Redis list).
func Mark(ctx context.Context, c *pgx.Conn, id int64) (bool, error) {
	tag, err := c.Exec(ctx, `UPDATE `+Table+` SET remain = 0 WHERE id = $1 AND remain = 1`, id)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func drawOrdered(ctx context.Context, c *pgx.Conn, owner int64) (int64, int64, error) {
	return pickAndMark(ctx, c, owner, `SELECT id FROM `+Table+` WHERE owner = $1 AND remain = 1 ORDER BY id LIMIT 1`, MaxRetries)
}

func drawRandom(ctx context.Context, c *pgx.Conn, owner int64) (int64, int64, error) {
	return pickAndMark(ctx, c, owner, `SELECT id FROM `+Table+` WHERE owner = $1 AND remain = 1 ORDER BY random() LIMIT 1`, 0)
}

// pickAndMark selects a ticket with pick, then marks it; when another
// draw marked it in between, it picks again, up to retries times.
func pickAndMark(ctx context.Context, c *pgx.Conn, owner int64, pick string, retries int64) (int64, int64, error) {
	for try := int64(0); ; try++ {
		var id int64
		err := c.QueryRow(ctx, pick, owner).Scan(&id)
		if err == pgx.ErrNoRows {
			return 0, try, nil
		}
		if err != nil {
			return 0, try, err
		}
		ok, err := Mark(ctx, c, id)
		if err != nil {
			return 0, try, err
		}
		if ok {
			return id, try, nil
		}
		if try == retries {
			return 0, try, nil
		}
	}
}

func drawSkipLocked(ctx context.Context, c *pgx.Conn, owner int64) (int64, int64, error) {
	var id int64
	err := c.QueryRow(ctx, `UPDATE `+Table+` SET remain = 0 WHERE id = (
    SELECT id FROM `+Table+` WHERE owner = $1 AND remain = 1 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
) RETURNING id`, owner).Scan(&id)
	if err == pgx.ErrNoRows {
		return 0, 0, nil
	}
	return id, 0, err
}
