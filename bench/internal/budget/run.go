package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Load describes one run of an approach.
type Load struct {
	// ID names the budget row; Run sets it to Budget first.
	ID     int64
	Budget int64
	// Clients each take one connection from the pool for the run.
	Clients int
	// Duration bounds the run when the budget lasts longer.
	Duration time.Duration
}

// Result is what a run measured.
type Result struct {
	Tally
	Budget int64
	// Remaining is the row's budget afterwards; negative when the naive
	// approach overspent.
	Remaining int64
}

// Overspend is how many units were granted beyond the budget.
func (r Result) Overspend() int64 { return Overspend(r.Budget, r.Grants) }

// Underspend is how many units were neither granted nor left in the row.
func (r Result) Underspend() int64 { return Underspend(r.Budget, r.Grants, r.Remaining) }

// Run sets the budget row, takes from it with a from load.Clients
// connections until it is spent or load.Duration has passed, and reads
// what is left. It returns an error only when it cannot measure; failed
// takes are counted in the Result.
func Run(ctx context.Context, pool *pgxpool.Pool, a Approach, load Load) (Result, error) {
	if load.Clients < 1 || load.Duration <= 0 || load.Budget < 0 {
		return Result{}, errors.New("budget: Load needs Clients, Duration and a budget ≥ 0")
	}
	if err := Reset(ctx, pool, load.ID, load.Budget); err != nil {
		return Result{}, err
	}
	takers := make([]Taker, load.Clients)
	for i := range takers {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("connect client %d: %w", i, err)
		}
		defer c.Release()
		conn, id := c.Conn(), load.ID
		takers[i] = func(ctx context.Context) (bool, error) { return a.take(ctx, conn, id) }
	}
	res := Result{Tally: Drive(ctx, takers, load.Duration), Budget: load.Budget}
	var err error
	if res.Remaining, err = Remaining(ctx, pool, load.ID); err != nil {
		return res, err
	}
	return res, nil
}
