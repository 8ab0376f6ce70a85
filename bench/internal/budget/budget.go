// Package budget implements seed 000's ways of spending a bounded budget
// in PostgreSQL on its own, one unit per statement or transaction, so that
// a benchmark can set them against each other and against counterd's
// TAKE: a naive read-then-write, SELECT ... FOR UPDATE in a transaction,
// and the lock-free conditional UPDATE ... WHERE budget > 0.
//
// The one idea to read first: every approach here is one hot row. Drive
// runs any taker (these, or a client of counterd) in a closed loop until
// the budget is refused to every client or the time is up, and counts
// grants, so the same accounting covers all of them.
//
// Budgets live in one table, Table, in the schema the pool's search_path
// names; each Run resets its row first.
package budget

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Table holds the budgets, one row per id. It is not called budgets so
// that it never meets a table of counterd's own in the same schema.
const Table = "seed_budgets"

// Approach is one way of taking a unit of budget.
type Approach struct {
	// Name is the short name reports and settings use.
	Name string
	// Summary says in one line what one grant does.
	Summary string
	// Exact approaches never grant more than the budget; the naive one
	// may.
	Exact bool

	take func(ctx context.Context, c *pgx.Conn, id int64) (bool, error)
}

var (
	// Naive reads the budget, then decrements it when it was positive:
	// two statements with a race between them.
	Naive = Approach{Name: "naive", Summary: "`SELECT budget`, then `UPDATE budget = budget - 1` when it was positive; two statements, no transaction (may overspend)", take: takeNaive}
	// ForUpdate locks the row, reads and decrements it in a transaction.
	ForUpdate = Approach{Name: "for-update", Summary: "`BEGIN; SELECT budget ... FOR UPDATE; UPDATE budget = budget - 1; COMMIT` (clients queue on the row lock)", Exact: true, take: takeForUpdate}
	// LockFree is the seed's best single-database answer: one conditional
	// UPDATE whose row count says whether the unit was granted.
	LockFree = Approach{Name: "lock-free", Summary: "`UPDATE ... SET budget = budget - 1 WHERE id = $1 AND budget > 0`, granted when it updated a row", Exact: true, take: takeLockFree}
)

// All returns every approach, in the order reports list them.
func All() []Approach { return []Approach{Naive, ForUpdate, LockFree} }

// Lookup finds an approach by name.
func Lookup(name string) (Approach, bool) {
	for _, a := range All() {
		if a.Name == name {
			return a, true
		}
	}
	return Approach{}, false
}

// Setup creates Table unless it exists.
func Setup(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+Table+` (
    id     bigint NOT NULL PRIMARY KEY,
    budget bigint NOT NULL
)`)
	if err != nil {
		return fmt.Errorf("create %s: %w", Table, err)
	}
	return nil
}

// Reset sets budget id to n, creating its row.
func Reset(ctx context.Context, pool *pgxpool.Pool, id, n int64) error {
	_, err := pool.Exec(ctx, `INSERT INTO `+Table+` (id, budget) VALUES ($1, $2)
ON CONFLICT (id) DO UPDATE SET budget = excluded.budget`, id, n)
	if err != nil {
		return fmt.Errorf("reset budget %d: %w", id, err)
	}
	return nil
}

// Remaining reads budget id; negative when an approach overspent it.
func Remaining(ctx context.Context, pool *pgxpool.Pool, id int64) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT budget FROM `+Table+` WHERE id = $1`, id).Scan(&n); err != nil {
		return 0, fmt.Errorf("read budget %d: %w", id, err)
	}
	return n, nil
}

func takeNaive(ctx context.Context, c *pgx.Conn, id int64) (bool, error) {
	var n int64
	if err := c.QueryRow(ctx, `SELECT budget FROM `+Table+` WHERE id = $1`, id).Scan(&n); err != nil {
		return false, err
	}
	if n <= 0 {
		return false, nil
	}
	_, err := c.Exec(ctx, `UPDATE `+Table+` SET budget = budget - 1 WHERE id = $1`, id)
	return err == nil, err
}

func takeForUpdate(ctx context.Context, c *pgx.Conn, id int64) (granted bool, err error) {
	tx, err := c.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback(ctx))
		}
	}()
	var n int64
	if err := tx.QueryRow(ctx, `SELECT budget FROM `+Table+` WHERE id = $1 FOR UPDATE`, id).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		if _, err := tx.Exec(ctx, `UPDATE `+Table+` SET budget = budget - 1 WHERE id = $1`, id); err != nil {
			return false, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, err
	}
	return n > 0, nil
}

func takeLockFree(ctx context.Context, c *pgx.Conn, id int64) (bool, error) {
	tag, err := c.Exec(ctx, `UPDATE `+Table+` SET budget = budget - 1 WHERE id = $1 AND budget > 0`, id)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}
