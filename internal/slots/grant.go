package slots

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/budget"
)

// grantBatch is a part's budget grants (kind_grant.go): units TAKE granted
// from leases, to be recorded against each lease exactly once per lane.
type grantBatch struct {
	leases, units []int64
	lanes         []int16
}

// recordGrants records g in tx, after tx advanced the lanes: the SQL is
// budget.RecordGrants, which owns the budget tables.
func recordGrants(ctx context.Context, tx pgx.Tx, lanes []string, g *grantBatch) error {
	_, _, err := budget.RecordGrants(ctx, tx, lanes, budget.Grants{Leases: g.leases, Units: g.units, Lanes: g.lanes})
	return err
}
