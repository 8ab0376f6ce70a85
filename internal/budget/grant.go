package budget

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Grants are one transaction's share of a round's budget grants
// (change.Grant): units TAKE granted from leases, to be recorded against
// each lease exactly once per lane. Element i is Units[i] granted from
// lease Leases[i], journaled in lane Lanes[i] (a 1-based index into the
// lanes RecordGrants is given).
type Grants struct {
	Leases, Units []int64
	Lanes         []int16
}

// RecordGrants records g against its leases in tx, the transaction that
// writes the round and has already advanced the round's lanes (lanes,
// the rows of counterd_instances it wrote; nil records every grant), so
// a lane's grants commit with its watermark, exactly once: a grant of a
// lane tx did not advance (the round was already recorded there) is
// skipped.
//
// It returns how many grants were due and how many found their lease.
// Fewer are found only when a lease row was deleted before its grants
// were recorded: its holder deletes it only after flushing its journal,
// so only a journal restored from an old snapshot gets there, and its
// grants are dropped (failing would stop every round for good; docs/guarantees.md: a
// restored journal voids the guarantee).
func RecordGrants(ctx context.Context, tx pgx.Tx, lanes []string, g Grants) (due, found int, err error) {
	if err := tx.QueryRow(ctx, recordGrantsSQL, lanes, g.Leases, g.Units, g.Lanes).Scan(&due, &found); err != nil {
		return 0, 0, fmt.Errorf("record budget grants: %w", err)
	}
	return due, found, nil
}

// recordGrantsSQL records grants against their leases: size shrinks (it
// counts units granted but not recorded; its CHECK refuses a grant beyond
// the lease), and the budget's units move to granted from leased, or from
// forfeited for a lease forfeited meanwhile (a grant acknowledged before
// the forfeit is still counted, and forfeited never goes below 0, since
// it holds the lease's whole size). A lane counts as advanced by this
// transaction when its watermark row's xmin is this transaction, so no
// second copy of the watermark logic is needed here.
const recordGrantsSQL = `
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
