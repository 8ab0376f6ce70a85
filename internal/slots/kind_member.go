package slots

import (
	"cmp"
	"context"
	"fmt"
	"maps"
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
//     cardinality moves by what it really gained or lost (addDecided,
//     kind_total.go, as INCRONCE's counted views): into its slot rows,
//     so GET, counter_totals and targets read it like any counter; into
//     its buckets at each operation's accept time where COUNTERD_WINDOWS
//     covers the key (likes per day: the day's adds less its removes);
//     and its COUNTERD_KEY_TTL moves.
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
		Read:   readMemberSQL,
		rollup: rollupPart{expireKeys: expireMembers, prune: pruneTombstones, pruned: "pruned_set_tombstones"}}
}

// readMemberSQL reads whether a member is in a set: $1 is
// change.SetMemberKey's, the key and the member in hex (a member is any bytes,
// which a text parameter cannot carry).
const readMemberSQL = `
SELECT 1::bigint AS count, 0::float8 AS variance
FROM counter_set_members c
WHERE c.key = convert_from(decode(split_part($1::text, ' ', 1), 'hex'), 'UTF8')
  AND c.member = decode(split_part($1::text, ' ', 2), 'hex') AND c.added_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM counter_expiry x WHERE x.key = c.key AND x.expires_at <= now())`

// memberRow is one (key, member) of a round: whether it was a member
// before the round, and is after; when the round added it, and the
// accept time of its last operation.
type memberRow struct {
	key, member string
	was, is     bool
	addedAt     time.Time
	changedAt   time.Time
	inserted    bool       // lockMembers created it, as written
	written     *time.Time // the added_at it was created with
}

// settled reports whether m is stored as the round leaves it: a row
// lockMembers created as its operations leave it, or an existing one
// whose membership did not change (lockMembers moved its changed_at).
func (m *memberRow) settled() bool {
	if !m.inserted {
		return m.is == m.was
	}
	if m.written == nil {
		return !m.is
	}
	return m.is && m.addedAt.Equal(*m.written)
}

func writeMembers(ctx context.Context, r *Round, cs []change.Change) error {
	ops := make([]change.Op, 0, len(cs))
	ids := make(map[change.Op]string, len(cs))
	clears := make(map[string]int64) // key: token of its last clear
	for _, c := range cs {
		op, err := change.SetOpOf(c)
		if err != nil {
			return err
		}
		if op.Clear {
			clears[op.Key] = max(clears[op.Key], op.Token)
			continue
		}
		ops = append(ops, op)
		ids[op] = change.OpID(c)
	}
	slices.SortFunc(ops, func(a, b change.Op) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Member, b.Member), cmp.Compare(a.Token, b.Token))
	})
	if err := renewExpiredSets(ctx, r, ops); err != nil {
		return err
	}
	if len(clears) == 0 {
		return decideOps(ctx, r, ops, ids, nil)
	}
	// A key's operations accepted before its clear are decided (their
	// replies) but written nowhere: the clear, after them, deletes every
	// member row of the key, and its SET or DEL (the Set writer, earlier
	// in this transaction) replaced its total. Those after the clear
	// apply to the empty set.
	var before, after []change.Op
	for _, o := range ops {
		if t, ok := clears[o.Key]; ok && o.Token > t {
			after = append(after, o)
		} else {
			before = append(before, o)
		}
	}
	if err := decideOps(ctx, r, before, ids, clears); err != nil {
		return err
	}
	keys := slices.Sorted(maps.Keys(clears))
	if _, err := r.Tx.Exec(ctx, clearMembersSQL, keys); err != nil {
		return fmt.Errorf("clear sets: %w", err)
	}
	return decideOps(ctx, r, after, ids, nil)
}

// renewExpiredSets starts a new life for the sets of ops whose expiry passed
// (EXPIRE, COUNTERD_KEY_TTL), as a DEL would, before their operations
// are decided: under their set locks, exclusive, it deletes their
// expiries, zeroes their totals and deletes their member rows, so the
// round's operations apply to empty sets, as an INCR of an expired key
// counts from 0. (The totals' own reset resets only a key the round's
// decisions move, and not its members: sets write without it.) A store
// that has seen no expiry yet pays nothing here (lockMembers asks, in
// its round trip, whether one exists now); with some, one lookup a
// round. A set whose expiry is the first the store sees, or passes
// during the round, is renewed by its next round, or the rollup: until
// then its members and total stay together, and read as expired.
func renewExpiredSets(ctx context.Context, r *Round, ops []change.Op) error {
	if !r.store.expiring.Load() || len(ops) == 0 {
		return nil
	}
	var keys []string
	for _, o := range ops {
		if len(keys) == 0 || keys[len(keys)-1] != o.Key {
			keys = append(keys, o.Key)
		}
	}
	var passed []string
	if err := r.Tx.QueryRow(ctx, passedExpiriesSQL, keys).Scan(&passed); err != nil {
		return fmt.Errorf("check set expiries: %w", err)
	}
	if len(passed) == 0 {
		return nil
	}
	// Under the locks, again: another daemon's round may have reset
	// them since (its new life is then kept).
	if err := r.Tx.QueryRow(ctx, unexpirePassedSQL, passed).Scan(&passed); err != nil {
		return fmt.Errorf("expire sets: %w", err)
	}
	if len(passed) == 0 {
		return nil
	}
	zero := newBatchArrays(len(passed))
	for _, k := range passed {
		zero.add(change.Change{Key: k, Kind: change.Set}, r.store.fallbackSlot())
	}
	tag, err := r.Tx.Exec(ctx, setBatch, zero.keys, zero.deltas, zero.vars, zero.fallback)
	if err != nil {
		return fmt.Errorf("expire sets: %w", err)
	}
	r.Result.Updated += int(tag.RowsAffected())
	if _, err := r.Tx.Exec(ctx, clearMembersSQL, passed); err != nil {
		return fmt.Errorf("expire sets: %w", err)
	}
	return nil
}

// passedExpiriesSQL lists the keys of $1 whose expiry passed.
const passedExpiriesSQL = `
SELECT coalesce(array_agg(key ORDER BY key), '{}') FROM counter_expiry
WHERE key = ANY($1::text[]) AND expires_at <= now()`

// unexpirePassedSQL takes the set locks of the keys of $1 exclusive, in
// order, then deletes those of their expiries that passed, returning
// their keys.
const unexpirePassedSQL = `
WITH keylock AS (
    SELECT count(*) AS n FROM (
        SELECT ` + keyLock + ` FROM unnest($1::text[]) WITH ORDINALITY AS u(k, ord)
    ) AS l
), gone AS (
    DELETE FROM counter_expiry WHERE key = ANY($1::text[]) AND expires_at <= now() AND (SELECT n FROM keylock) >= 0
    RETURNING key
)
SELECT coalesce(array_agg(key ORDER BY key), '{}') FROM gone`

// expireMembers is the rollup's part of expiring keys: it takes the set
// locks of keys exclusive where no round holds them (without waiting)
// and deletes those keys' member rows; a key a round is deciding set
// operations of is left for a later pass.
func expireMembers(ctx context.Context, tx pgx.Tx, keys []string) ([]string, error) {
	var locked []string
	if err := tx.QueryRow(ctx, expireMembersSQL, keys).Scan(&locked); err != nil {
		return nil, fmt.Errorf("expire set members: %w", err)
	}
	return locked, nil
}

const expireMembersSQL = `
WITH locked AS (
    SELECT k, ord FROM unnest($1::text[]) WITH ORDINALITY AS u(k, ord)
    WHERE pg_try_advisory_xact_lock(` + keyLockClass + `, hashtext(k))
), gone AS (
    DELETE FROM counter_set_members WHERE key IN (SELECT k FROM locked)
)
SELECT coalesce(array_agg(k ORDER BY ord), '{}') FROM locked`

// clearMembersSQL deletes every member row of the keys of $1: a DEL or
// SET of them. The Set writer took their key locks (keyLock) earlier in
// the transaction, so no round of another daemon adds to them meanwhile.
const clearMembersSQL = `DELETE FROM counter_set_members WHERE key = ANY($1::text[])`

// decideOps decides ops (sorted) in pieces of at most the statement
// bound, a member's operations in one piece where they fit: their rows
// locked, their outcomes recorded, the rows saved and the cardinality
// moved, except for keys of void, whose operations are only decided.
func decideOps(ctx context.Context, r *Round, ops []change.Op, ids map[change.Op]string, void map[string]int64) error {
	same := func(i int) bool { return ops[i].Key == ops[i-1].Key && ops[i].Member == ops[i-1].Member }
	return pieces(len(ops), r.store.rows, same, func(lo, hi int) error {
		rows, cards, err := lockMembers(ctx, r, ops[lo:hi])
		if err != nil {
			return err
		}
		ds := applyOps(r, ops[lo:hi], rows, ids, cards)
		if len(void) > 0 {
			isVoid := func(key string) bool { _, ok := void[key]; return ok }
			rows = slices.DeleteFunc(rows, func(m memberRow) bool { return isVoid(m.key) })
			ds = slices.DeleteFunc(ds, func(d decided) bool { return isVoid(d.key) })
		}
		if err := saveMembers(ctx, r.Tx, rows); err != nil {
			return err
		}
		return addDecidedReset(ctx, r, ds, "set cardinality", false)
	})
}

// lockMembers locks (creating if need be) the rows of the members of ops
// (sorted), and returns them in the same order. A row it creates is
// written as the member's operations leave a member that was none
// (settled: nothing more to save unless a limit refused an SADD); an
// existing row it locks gets its changed_at moved, nothing else.
func lockMembers(ctx context.Context, r *Round, ops []change.Op) ([]memberRow, map[string]int64, error) {
	var keys, addKeys []string
	var members [][]byte
	var added []*time.Time
	var changed []time.Time
	for i, o := range ops {
		if i == 0 || !(o.Key == ops[i-1].Key && o.Member == ops[i-1].Member) {
			keys, members = append(keys, o.Key), append(members, []byte(o.Member))
			added, changed = append(added, nil), append(changed, time.Time{})
		}
		if o.Add && (len(addKeys) == 0 || addKeys[len(addKeys)-1] != o.Key) {
			addKeys = append(addKeys, o.Key)
		}
		j := len(keys) - 1
		switch at := time.UnixMicro(o.Token); {
		case o.Add && added[j] == nil:
			added[j] = &at
		case !o.Add:
			added[j] = nil
		}
		changed[j] = time.UnixMicro(o.Token) // ops are in token order
	}
	// One round trip: the rows, the cardinalities the limit needs
	// (readCards), and, while this store has seen no expiry, whether one
	// exists now (for the next rounds: renewExpiredSets).
	var b pgx.Batch
	b.Queue(lockMembersSQL, keys, members, added, changed)
	if len(addKeys) > 0 {
		b.Queue(readCardsSQL, addKeys)
	}
	probe := !r.store.expiring.Load()
	if probe {
		b.Queue(`SELECT EXISTS (SELECT FROM counter_expiry)`)
	}
	br := r.Tx.SendBatch(ctx, &b)
	defer br.Close()
	out, err := scanLocked(br, keys, added)
	if err != nil {
		return nil, nil, err
	}
	cards := make(map[string]int64, len(addKeys))
	if len(addKeys) > 0 {
		rows, err := br.Query()
		if err != nil {
			return nil, nil, fmt.Errorf("read set cardinality: %w", err)
		}
		var k string
		var n int64
		if _, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { cards[k] = n; return nil }); err != nil {
			return nil, nil, fmt.Errorf("read set cardinality: %w", err)
		}
	}
	if probe {
		var any bool
		if err := br.QueryRow().Scan(&any); err != nil {
			return nil, nil, fmt.Errorf("check for expiries: %w", err)
		}
		if any {
			r.store.expiring.Store(true)
		}
	}
	return out, cards, br.Close()
}

// scanLocked reads lockMembersSQL's rows: one per member of keys, in
// order, created with added if inserted.
func scanLocked(br pgx.BatchResults, keys []string, added []*time.Time) ([]memberRow, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("lock set members: %w", err)
	}
	defer rows.Close()
	out := make([]memberRow, 0, len(keys))
	for rows.Next() {
		var m memberRow
		var member []byte
		if err := rows.Scan(&m.key, &member, &m.inserted, &m.was); err != nil {
			return nil, fmt.Errorf("lock set members: %w", err)
		}
		m.member = string(member)
		if m.inserted {
			m.written, m.was = added[len(out)], false
		}
		m.is = m.was
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

// lockMembersSQL takes its keys' set locks, shared (keyLockShared), then
// upserts the row of each (key, member) in order: a new row as its
// operations leave it ($3, $4), an existing one locked with only its
// changed_at moved. It returns whether it inserted the row, and whether
// the row is a member (for an existing row: was one).
const lockMembersSQL = `
WITH keylock AS (
    SELECT count(*) AS n FROM (
        SELECT ` + keyLockShared + ` FROM unnest($1::text[]) WITH ORDINALITY AS u(k, ord)
    ) AS l
)
INSERT INTO counter_set_members AS s (key, member, added_at, changed_at)
SELECT k, m, a, c FROM unnest($1::text[], $2::bytea[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS p(k, m, a, c, ord)
WHERE (SELECT n FROM keylock) >= 0
ORDER BY ord
ON CONFLICT (key, member) DO UPDATE SET changed_at = greatest(s.changed_at, excluded.changed_at)
RETURNING s.key, s.member, s.xmax = 0, s.added_at IS NOT NULL`

// applyOps applies ops (sorted) to rows (their members, sorted), records
// each operation's outcome, and returns the changes of the keys'
// cardinality: +1 at the accept time of an operation that added a
// member, -1 at one that removed one. An SADD of a new member to a key
// whose cardinality (cards, moved as ops apply) is at
// change.MaxSetMembers is refused: outcome change.Refused, no change.
func applyOps(r *Round, ops []change.Op, rows []memberRow, ids map[change.Op]string, cards map[string]int64) []decided {
	if r.Result.Outcomes == nil {
		r.Result.Outcomes = make(map[string]int64, len(ops))
	}
	var ds []decided
	j := -1
	for i, o := range ops {
		if i == 0 || !(o.Key == ops[i-1].Key && o.Member == ops[i-1].Member) {
			j++
		}
		m := &rows[j]
		var out int64
		switch {
		case o.Add == m.is:
		case o.Add && cards[o.Key] >= change.MaxSetMembers:
			r.Result.Outcomes[ids[o]] = change.Refused
			continue
		case o.Add:
			m.addedAt, out = time.UnixMicro(o.Token), 1
			cards[o.Key]++
			ds = append(ds, decided{key: o.Key, at: o.Token, delta: 1})
		default:
			out = 1
			cards[o.Key]--
			ds = append(ds, decided{key: o.Key, at: o.Token, delta: -1})
		}
		m.is = o.Add
		m.changedAt = time.UnixMicro(o.Token) // ops are in token order
		r.Result.Outcomes[ids[o]] = out
	}
	return ds
}

// readCardsSQL reads the cardinality (the total) of each key of $1 that
// a round adds to, as the round's transaction sees it: what committed,
// and what earlier pieces of the round added. Other daemons' rounds
// deciding the same key meanwhile are not seen, so a set can pass
// change.MaxSetMembers by what they add at the same moment.
const readCardsSQL = `
SELECT u.k, least((SELECT coalesce(sum(c.total), 0) FROM counters c WHERE c.key = u.k)
              + (SELECT coalesce(sum(s.count), 0) FROM counter_slots s WHERE s.key = u.k), 9223372036854775807)::bigint
FROM unnest($1::text[]) AS u(k)`

// saveMembers saves, in one statement, the rows of the round that
// lockMembers did not already leave as the round leaves them (settled):
// an existing row whose membership changed, or a new one whose SADD a
// limit refused. A member the round added gets its added_at, one that
// stays keeps it, a row that is no member now (removed, or created for
// an SREM of a non-member) gets NULL and stays as a tombstone; every
// row's changed_at is its last operation's accept time (lockMembers
// moved it already; never back: a replayed round's older operation does
// not make the row look older to a reconcile). A round of new members,
// or of repeats, writes nothing here.
func saveMembers(ctx context.Context, tx pgx.Tx, rows []memberRow) error {
	rows = slices.DeleteFunc(slices.Clone(rows), func(m memberRow) bool { return m.settled() })
	if len(rows) == 0 {
		return nil
	}
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

// SetMembers lists up to n members of key's exact set, in byte order,
// after the member after (nil: from the first): SMEMBERS and SSCAN.
func (s *Store) SetMembers(ctx context.Context, key string, after []byte, n int) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT member FROM counter_set_members_of($1, $2, $3)`, key, n, after)
	if err != nil {
		return nil, fmt.Errorf("list set members: %w", err)
	}
	members, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("list set members: %w", err)
	}
	return members, nil
}
