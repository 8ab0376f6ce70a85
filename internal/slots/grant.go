package slots

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// grantBatch is a part's budget grants (kind_grant.go): units TAKE granted
// from leases, to be recorded against each lease exactly once per lane.
type grantBatch struct {
	leases, units []int64
	lanes         []int16
}

// recordGrants runs writeGrants in tx, after tx advanced the lanes.
func recordGrants(ctx context.Context, tx pgx.Tx, lanes []string, g *grantBatch) error {
	var leases, recorded int
	if err := tx.QueryRow(ctx, writeGrants, lanes, g.leases, g.units, g.lanes).Scan(&leases, &recorded); err != nil {
		return fmt.Errorf("record budget grants: %w", err)
	}
	// recorded < leases only if a lease row was deleted before its
	// grants were recorded: its holder deletes it only after flushing
	// its journal, so only a journal restored from an old snapshot
	// gets here. Failing would stop every round for good; the grants
	// are dropped (README: a restored journal voids the guarantee).
	return nil
}

// writeGrants records grants against their leases: size shrinks (it
// counts units granted but not recorded), and the budget's units move to
// granted from leased, or from forfeited for a lease forfeited meanwhile
// (a grant acknowledged before the forfeit is still counted, and
// forfeited never goes below 0, since it holds the lease's whole size).
// Only grants of lanes this transaction advanced ($1 null: all) are
// recorded. It returns how many leases were due and how many were found.
const writeGrants = `
WITH fresh AS (
    SELECT array_agg(coalesce(ci.xmin = pg_current_xact_id()::xid, false) ORDER BY l.ord) AS lanes
    FROM unnest($1::text[]) WITH ORDINALITY AS l(name, ord)
    LEFT JOIN counterd_instances ci ON ci.instance = l.name
), due AS (
    SELECT x.id, x.n FROM unnest($2::bigint[], $3::bigint[], $4::smallint[]) AS x(id, n, lane)
    WHERE $1::text[] IS NULL OR (SELECT lanes FROM fresh)[x.lane]
), g AS (
    UPDATE budget_leases bl SET size = bl.size - due.n, granted = bl.granted + due.n
    FROM due WHERE bl.id = due.id
    RETURNING bl.key, bl.forfeited, due.n
), s AS (
    SELECT key, sum(n) AS n, coalesce(sum(n) FILTER (WHERE forfeited), 0) AS f FROM g GROUP BY key
), b AS (
    UPDATE budgets bu SET granted = bu.granted + s.n, leased = bu.leased - (s.n - s.f), forfeited = bu.forfeited - s.f
    FROM s WHERE bu.key = s.key
    RETURNING 1
)
SELECT (SELECT count(*) FROM due)::int, (SELECT count(*) FROM g)::int`
