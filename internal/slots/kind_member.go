package slots

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/change"
)

// Exact sets in the store (change.SetOp): SADD and SREM.
//
// counter_set_members holds one row per member of a key. A round's
// operations are decided in its transaction, after its lanes moved, so
// only operations of lanes this round is the first to write are decided
// (a replayed round whose lanes committed decides nothing again):
//
//  1. lockMembers upserts a row for every (key, member) of the round, in
//     sorted order, and returns whether each was a member (a row it
//     created has added_at NULL): two daemons deciding one member take
//     turns, the second seeing what the first committed, so across
//     daemons operations apply in the order their rounds commit.
//  2. Each member's operations apply in token order (accept order within
//     this daemon): SADD adds a member that is not one (outcome 1, else
//     0), SREM removes one that is (1, else 0). The outcomes go to
//     Result.Outcomes, by change.OpID: they are the commands' replies.
//  3. saveMembers stamps the members added and deletes the rows that end
//     up no member, and each key's cardinality moves by what it really
//     gained or lost, into its slot rows with the totals' own statement
//     (kind_total.go, as INCRONCE's counted views), so GET,
//     counter_totals and targets read it like any counter.
//
// A round's operations are taken in pieces of at most the statement
// bound, in the same sorted order, a member's operations in one piece
// where they fit (a later piece sees what the earlier saved: the same
// transaction).

// MemberWriter is the Writer of exact sets (change.SetOp), one of a
// store's Options.Kinds. Read reads whether a member is in a set: $1 is
// change.SetMemberKey's: count 1 for a member, no row for none.
func MemberWriter() Writer {
	return Writer{Name: "set_members", Kinds: []change.Kind{change.SetOp}, Order: -1, Exec: writeMembers, whole: true,
		Read: readMemberSQL}
}

// readMemberSQL reads whether a member is in a set: $1 is
// change.SetMemberKey's, the key and the member in hex (a member is any bytes,
// which a text parameter cannot carry).
const readMemberSQL = `
SELECT 1::bigint AS count, 0::float8 AS variance
FROM counter_set_members c
WHERE c.key = convert_from(decode(split_part($1::text, ' ', 1), 'hex'), 'UTF8')
  AND c.member = decode(split_part($1::text, ' ', 2), 'hex') AND c.added_at IS NOT NULL`

// memberRow is one (key, member) of a round: whether it was a member
// before the round, and is after.
type memberRow struct {
	key, member string
	was, is     bool
	addedAt     time.Time
}

func writeMembers(ctx context.Context, r *Round, cs []change.Change) error {
	ops := make([]change.Op, len(cs))
	ids := make(map[change.Op]string, len(cs))
	for i, c := range cs {
		var err error
		if ops[i], err = change.SetOpOf(c); err != nil {
			return err
		}
		ids[ops[i]] = change.OpID(c)
	}
	slices.SortFunc(ops, func(a, b change.Op) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Member, b.Member), cmp.Compare(a.Token, b.Token))
	})
	same := func(i int) bool { return ops[i].Key == ops[i-1].Key && ops[i].Member == ops[i-1].Member }
	return pieces(len(ops), r.store.rows, same, func(lo, hi int) error {
		rows, err := lockMembers(ctx, r.Tx, ops[lo:hi])
		if err != nil {
			return err
		}
		applyOps(r, ops[lo:hi], rows, ids)
		if err := saveMembers(ctx, r.Tx, rows); err != nil {
			return err
		}
		return addCardinality(ctx, r, rows)
	})
}

// lockMembers locks (creating if need be) the rows of the members of ops
// (sorted), and returns them in the same order.
func lockMembers(ctx context.Context, tx pgx.Tx, ops []change.Op) ([]memberRow, error) {
	var keys []string
	var members [][]byte
	for i, o := range ops {
		if i == 0 || !(o.Key == ops[i-1].Key && o.Member == ops[i-1].Member) {
			keys, members = append(keys, o.Key), append(members, []byte(o.Member))
		}
	}
	rows, err := tx.Query(ctx, lockMembersSQL, keys, members)
	if err != nil {
		return nil, fmt.Errorf("lock set members: %w", err)
	}
	out := make([]memberRow, 0, len(keys))
	for rows.Next() {
		var m memberRow
		var member []byte
		if err := rows.Scan(&m.key, &member, &m.was); err != nil {
			rows.Close()
			return nil, fmt.Errorf("lock set members: %w", err)
		}
		m.member, m.is = string(member), m.was
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock set members: %w", err)
	}
	if len(out) != len(keys) {
		return nil, fmt.Errorf("BUG: lock set members: %d rows for %d members", len(out), len(keys))
	}
	return out, nil
}

// lockMembersSQL upserts the row of each (key, member) in order,
// returning whether it was a member; the no-op update locks an existing
// row and makes RETURNING show it.
const lockMembersSQL = `
INSERT INTO counter_set_members AS s (key, member)
SELECT k, m FROM unnest($1::text[], $2::bytea[]) WITH ORDINALITY AS p(k, m, ord)
ORDER BY ord
ON CONFLICT (key, member) DO UPDATE SET added_at = s.added_at
RETURNING s.key, s.member, s.added_at IS NOT NULL`

// applyOps applies ops (sorted) to rows (their members, sorted) and
// records each operation's outcome.
func applyOps(r *Round, ops []change.Op, rows []memberRow, ids map[change.Op]string) {
	if r.Result.Outcomes == nil {
		r.Result.Outcomes = make(map[string]int64, len(ops))
	}
	j := -1
	for i, o := range ops {
		if i == 0 || !(o.Key == ops[i-1].Key && o.Member == ops[i-1].Member) {
			j++
		}
		m := &rows[j]
		var out int64
		if o.Add != m.is {
			out = 1
			if o.Add {
				m.addedAt = time.UnixMicro(o.Token)
			}
		}
		m.is = o.Add
		r.Result.Outcomes[ids[o]] = out
	}
}

// saveMembers stamps the members the round added and deletes the rows
// that are no member now (removed, or created by lockMembers for an
// SREM of a non-member).
func saveMembers(ctx context.Context, tx pgx.Tx, rows []memberRow) error {
	var addK, delK []string
	var addM, delM [][]byte
	var addAt []time.Time
	for _, m := range rows {
		switch {
		case m.is && !m.was:
			addK, addM, addAt = append(addK, m.key), append(addM, []byte(m.member)), append(addAt, m.addedAt)
		case !m.is:
			delK, delM = append(delK, m.key), append(delM, []byte(m.member))
		}
	}
	if len(addK) > 0 {
		if _, err := tx.Exec(ctx, stampMembersSQL, addK, addM, addAt); err != nil {
			return fmt.Errorf("save set members: %w", err)
		}
	}
	if len(delK) > 0 {
		if _, err := tx.Exec(ctx, deleteMembersSQL, delK, delM); err != nil {
			return fmt.Errorf("delete set members: %w", err)
		}
	}
	return nil
}

const stampMembersSQL = `
UPDATE counter_set_members s SET added_at = u.at
FROM unnest($1::text[], $2::bytea[], $3::timestamptz[]) AS u(k, m, at)
WHERE s.key = u.k AND s.member = u.m`

const deleteMembersSQL = `
DELETE FROM counter_set_members s
USING unnest($1::text[], $2::bytea[]) AS u(k, m)
WHERE s.key = u.k AND s.member = u.m`

// addCardinality moves each key's total by the members the round really
// added less those it removed, with the totals' written CTE, as a
// statement of its own (onceTotals).
func addCardinality(ctx context.Context, r *Round, rows []memberRow) error {
	var totals []change.Change
	for i, m := range rows {
		d := int64(0)
		switch {
		case m.is && !m.was:
			d = 1
		case m.was && !m.is:
			d = -1
		}
		if i == 0 || m.key != rows[i-1].key {
			totals = append(totals, change.Change{Key: m.key, Kind: change.Total})
		}
		totals[len(totals)-1].Delta += d
	}
	totals = slices.DeleteFunc(totals, func(c change.Change) bool { return c.Delta == 0 })
	if len(totals) == 0 {
		return nil
	}
	b := newBatchArrays(len(totals))
	for _, c := range totals {
		b.add(c, r.store.fallbackSlot())
	}
	expiring, err := r.store.anyExpiry(ctx)
	if err != nil {
		return err
	}
	var u, i int
	err = r.Tx.QueryRow(ctx, onceTotals(expiring, false), nil, b.keys, b.deltas, b.vars, b.fallback, b.lanes, r.store.home).Scan(&u, &i)
	if err != nil {
		return fmt.Errorf("add set cardinality: %w", err)
	}
	r.Result.Updated, r.Result.Inserted = r.Result.Updated+u, r.Result.Inserted+i
	return nil
}
