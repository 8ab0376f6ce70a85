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
//  3. saveMembers saves every row the round decided in one statement:
//     added_at (the accept time of the SADD that added a member, kept
//     for one that stays, NULL for a non-member) and changed_at (the
//     latest accept time decided on the row). A removed member, and an
//     SREM of a non-member, keep their row as a tombstone (added_at
//     NULL): a reconcile against the app's table as of an earlier time
//     (counter_set_reconcile, migration 022) leaves the row alone, so it
//     cannot undo the operation; the rollup prunes tombstones
//     ROLLUP_SET_TOMBSTONE_SLACK old (pruneTombstones). Each key's
//     cardinality moves by what it really gained or lost, into its slot
//     rows with the totals' own statement (kind_total.go, as INCRONCE's
//     counted views), so GET, counter_totals and targets read it like
//     any counter.
//
// A round's operations are taken in pieces of at most the statement
// bound, in the same sorted order, a member's operations in one piece
// where they fit (a later piece sees what the earlier saved: the same
// transaction).

// MemberWriter is the Writer of exact sets (change.SetOp), one of a
// store's Options.Kinds. Read reads whether a member is in a set: $1 is a
// change's Key (change.SetOpChange, with any token): count 1 for a
// member, no row for none.
func MemberWriter() Writer {
	return Writer{Name: "set_members", Kinds: []change.Kind{change.SetOp}, Order: -1, Exec: writeMembers, whole: true,
		Read:   readMemberSQL,
		rollup: rollupPart{prune: pruneTombstones, pruned: "pruned_set_tombstones"}}
}

// readMemberSQL reads whether a member is in a set: $1 is
// MemberReadKey's, the key and the member in hex (a member is any bytes,
// which a text parameter cannot carry).
const readMemberSQL = `
SELECT 1::bigint AS count, 0::float8 AS variance
FROM counter_set_members c
WHERE c.key = convert_from(decode(split_part($1::text, ' ', 1), 'hex'), 'UTF8')
  AND c.member = decode(split_part($1::text, ' ', 2), 'hex') AND c.added_at IS NOT NULL`

// memberRow is one (key, member) of a round: whether it was a member
// before the round, and is after; when the round added it, and the
// accept time of its last operation.
type memberRow struct {
	key, member string
	was, is     bool
	addedAt     time.Time
	changedAt   time.Time
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
		m.changedAt = time.UnixMicro(o.Token) // ops are in token order
		r.Result.Outcomes[ids[o]] = out
	}
}

// saveMembers saves every row of the round, one statement: a member the
// round added gets its added_at, one that stays keeps it, a row that is
// no member now (removed, or created by lockMembers for an SREM of a
// non-member) gets NULL and stays as a tombstone; every row's changed_at
// moves to its last operation's accept time (never back: a replayed
// round's older operation does not make the row look older to a
// reconcile).
func saveMembers(ctx context.Context, tx pgx.Tx, rows []memberRow) error {
	keys := make([]string, len(rows))
	members := make([][]byte, len(rows))
	is := make([]bool, len(rows))
	added := make([]*time.Time, len(rows))
	changed := make([]time.Time, len(rows))
	for i, m := range rows {
		keys[i], members[i], is[i], changed[i] = m.key, []byte(m.member), m.is, m.changedAt
		if m.is && !m.was {
			added[i] = &rows[i].addedAt
		}
	}
	if _, err := tx.Exec(ctx, saveMembersSQL, keys, members, is, added, changed); err != nil {
		return fmt.Errorf("save set members: %w", err)
	}
	return nil
}

const saveMembersSQL = `
UPDATE counter_set_members s
SET added_at = CASE WHEN u.member THEN coalesce(u.added, s.added_at) END,
    changed_at = greatest(s.changed_at, u.changed)
FROM unnest($1::text[], $2::bytea[], $3::boolean[], $4::timestamptz[], $5::timestamptz[]) AS u(k, m, member, added, changed)
WHERE s.key = u.k AND s.member = u.m`

// pruneTombstones is the rollup's pruning of exact sets' tombstones: rows
// of no member whose last decision is opts.SetTombstoneSlack
// (ROLLUP_SET_TOMBSTONE_SLACK) old, in chunks of opts.Chunk, skipping
// rows a round or a reconcile holds. A reconcile as of an earlier time
// than the slack could undo the operation a pruned tombstone recorded.
func pruneTombstones(s *Store, ctx context.Context, opts PruneOptions) (int64, error) {
	chunk := opts.Chunk
	if chunk <= 0 {
		chunk = DefaultFoldChunk
	}
	before := time.Now().Add(-opts.SetTombstoneSlack)
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, pruneTombstonesSQL, before, chunk)
		if err != nil {
			return total, fmt.Errorf("prune set tombstones: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(chunk) {
			return total, nil
		}
	}
}

// pruneTombstonesSQL deletes up to $2 tombstones decided before $1. The
// outer condition is checked again on the row locked, so a row a round
// made a member meanwhile stays.
const pruneTombstonesSQL = `
DELETE FROM counter_set_members s WHERE (s.key, s.member) IN (
    SELECT t.key, t.member FROM counter_set_members t
    WHERE t.added_at IS NULL AND t.changed_at < $1
    ORDER BY t.changed_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
) AND s.added_at IS NULL`

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
