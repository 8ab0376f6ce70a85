package slots

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/budget"
	"github.com/counterd/counterd/internal/change"
)

// grantBatch is a part's budget grants (change.Grant): units TAKE granted
// from leases, to be recorded against each lease exactly once per lane.
type grantBatch struct {
	leases, units []int64
	lanes         []int16
}

// takeGrants removes the grants from p.changes and returns them, or nil
// when p has none (the common case, which then costs one pass).
func takeGrants(p *part) *grantBatch {
	var g *grantBatch
	kept := p.changes[:0]
	for _, c := range p.changes {
		if c.Kind != change.Grant {
			kept = append(kept, c)
			continue
		}
		if g == nil {
			g = &grantBatch{}
		}
		g.leases = append(g.leases, c.Bucket)
		g.units = append(g.units, c.Delta)
		g.lanes = append(g.lanes, c.lane)
	}
	if g != nil {
		clear(p.changes[len(kept):])
		p.changes = kept
	}
	return g
}

// writeWithGrants runs writeBatch (args) and then recordGrants in one
// transaction, so a lane's grants commit with its watermark: exactly once.
func (s *Store) writeWithGrants(ctx context.Context, p *part, g *grantBatch, query string, scan func(pgx.Row) error, args ...any) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := scan(tx.QueryRow(ctx, query, args...)); err != nil {
			return err
		}
		return recordGrants(ctx, tx, p.lanes, g)
	})
}

// recordGrants records g in tx, after tx advanced the lanes: the SQL
// is budget.RecordGrants, which owns the budget tables.
func recordGrants(ctx context.Context, tx pgx.Tx, lanes []string, g *grantBatch) error {
	_, _, err := budget.RecordGrants(ctx, tx, lanes, budget.Grants{Leases: g.leases, Units: g.units, Lanes: g.lanes})
	return err
}
