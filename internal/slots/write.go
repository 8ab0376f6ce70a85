package slots

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/counterd/counterd/internal/store"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/change"
)

// Apply adds every change in one statement (its own transaction), without
// recording an identity: a retry after a lost acknowledgement counts
// twice. Daemons use ApplyOnce.
func (s *Store) Apply(ctx context.Context, batch []change.Change) (store.ApplyResult, error) {
	var res store.ApplyResult
	if len(batch) == 0 {
		return res, nil
	}
	p := &part{changes: make([]laneChange, len(batch))}
	for i, c := range batch {
		p.changes[i] = laneChange{Change: c}
	}
	_, err := s.write(ctx, 0, p, &res)
	return res, err
}

// ApplyOnce adds every change exactly once per id: the keys are split by
// lane over up to s.writers transactions (one per minKeysPerWriter keys),
// run at once, and each transaction records id for its lanes. A lane
// whose id (or a later one of the same generation) is already recorded is
// skipped, so a batch retried after some or all of its transactions
// committed, or replayed after a crash, is written once. On error some
// lanes may be committed; retry with the same id. Changes must be unique
// per change.ID: totals, windowed kinds (write_buckets.go), Set and Expire
// (set.go) and budget grants (grant.go); a key's changes share its lane
// and transaction.
func (s *Store) ApplyOnce(ctx context.Context, id store.BatchID, batch []change.Change) (store.ApplyResult, error) {
	// A small batch is written faster by one transaction than by several
	// that each pay a commit; identities are per lane, so the grouping
	// may change from batch to batch.
	writers := min(s.writers, 1+len(batch)/minKeysPerWriter)
	parts := make([]part, writers)
	for l := range store.Lanes {
		p := &parts[l%writers]
		p.lanes = append(p.lanes, laneName(id.Identity, l))
	}
	// Size each part's changes first: growing them by append copied the
	// round about twice over (11% of the daemon's CPU at -P 16).
	lanes, sizes := make([]int, len(batch)), make([]int, writers)
	for i, c := range batch {
		lanes[i] = store.LaneOf(c.Key)
		sizes[lanes[i]%writers]++
	}
	for w := range parts {
		parts[w].changes = make([]laneChange, 0, sizes[w])
	}
	for i, c := range batch {
		l := lanes[i]
		p := &parts[l%writers]
		// Lane l is the (l/writers)-th lane of its part; SQL arrays count
		// from 1.
		p.changes = append(p.changes, laneChange{Change: c, lane: int16(l/writers + 1)})
	}
	var (
		wg      sync.WaitGroup
		results = make([]store.ApplyResult, writers)
		errs    = make([]error, writers)
		doneAll = make([]bool, writers)
	)
	for w := range parts {
		wg.Go(func() {
			doneAll[w], errs[w] = s.write(ctx, int64(id.Seq), &parts[w], &results[w])
			errs[w] = fenced(errs[w])
		})
	}
	wg.Wait()
	res := store.ApplyResult{Duplicate: true}
	for w, r := range results {
		res.Updated += r.Updated
		res.Inserted += r.Inserted
		res.Attempts += r.Attempts
		res.Duplicate = res.Duplicate && doneAll[w]
	}
	return res, errors.Join(errs...)
}

// part is what one transaction writes.
type part struct {
	lanes   []string // lane identities it records; nil for none
	changes []laneChange
}

// laneChange is a change with its lane's 1-based index into part.lanes.
type laneChange struct {
	change.Change
	lane int16
}

// write sorts the part by key, because every writer must lock rows in the
// same order, and writes it in one statement. Deadlocks and serialization
// failures are retried. It reports whether every lane had already
// recorded seq.
func (s *Store) write(ctx context.Context, seq int64, p *part, res *store.ApplyResult) (bool, error) {
	slices.SortFunc(p.changes, func(a, b laneChange) int { return strings.Compare(a.Key, b.Key) })
	grants := takeGrants(p) // budget grants are written by writeGrants, in the same transaction
	if s.special(p) {
		return s.writeTx(ctx, seq, p, grants, res) // SET, DEL, EXPIRE or COUNTERD_KEY_TTL: set.go
	}
	n := len(p.changes)
	keys, deltas, vars := make([]string, 0, n), make([]int64, 0, n), make([]float64, 0, n)
	fallback, lanes := make([]int16, 0, n), make([]int16, 0, n)
	var buckets bucketBatch
	for _, c := range p.changes {
		if c.Kind.Windowed() {
			buckets.add(s, c)
			continue
		}
		if c.Kind != change.Total {
			return false, fmt.Errorf("write batch: key %q has kind %v, which this store cannot write", c.Key, c.Kind)
		}
		keys, deltas, vars, lanes = append(keys, c.Key), append(deltas, c.Delta), append(vars, c.Var), append(lanes, c.lane)
		fallback = append(fallback, int16(rand.IntN(s.slots)))
	}
	args := []any{pgx.QueryExecModeCacheDescribe, p.lanes, seq, keys, deltas, vars, fallback, lanes}
	if buckets.len() > 0 {
		args = append(args, buckets.args()...)
	}
	var doneLanes int
	err := s.retry(ctx, &res.Attempts, func() error {
		expiring, err := s.anyExpiry(ctx) // expire.go
		if err != nil {
			return err
		}
		query := writeStatement(expiring, buckets.len() > 0)
		scan := func(r pgx.Row) error { return r.Scan(&res.Updated, &res.Inserted, &doneLanes) }
		if grants != nil {
			return s.writeWithGrants(ctx, p, grants, query, scan, args...)
		}
		return scan(s.pool.QueryRow(ctx, query, args...))
	})
	if err != nil {
		return false, fmt.Errorf("write batch (attempt %d): %w", res.Attempts, err)
	}
	return p.lanes != nil && doneLanes == len(p.lanes), nil
}

// The write runs as an unnamed statement (QueryExecModeCacheDescribe), so
// PostgreSQL plans it for each round with the table as it is: a generic
// plan cached while the slot table was tiny kept a sequential scan per key
// as it grew (a round of 2,000 keys over 100,000 rows took 32 s, not 40 ms).
//
// writeBatch writes one transaction's share of a round, exactly once per
// lane, in one statement.
//
// advanced moves the watermark of each lane in $1 to $2 where it was
// below; fresh says, per lane, whether it moved (a null $1 writes every
// key without identity). written then adds each key whose lane is fresh:
// for each key, in the sorted order of $3, the lateral subquery locks the
// first slot row no other transaction holds (FOR UPDATE SKIP LOCKED never
// waits) and the insert conflicts with that row and adds to it; a key with
// no free row is upserted into the caller's random slot, which may wait
// for its holder. The executor takes one key at a time (no sort between
// the join and the insert, and fresh is a one-off InitPlan rather than a
// join), so a writer only ever waits while holding rows of smaller keys
// and writers cannot form a lock cycle. Counts are numeric: no sum can
// overflow, so no key can make a round fail.
const writeBatch = writeHead + writeTail

// writeTail counts what writeHead wrote.
const writeTail = `
SELECT count(*) FILTER (WHERE NOT created)::int, count(*) FILTER (WHERE created)::int,
       (coalesce(cardinality($1::text[]), 0) - (SELECT count(*) FROM advanced))::int
FROM written`

// advancedCTE moves the watermark of each lane in $1 to $2 where it was
// below and returns the lanes it moved. counterd_fence, a one-time filter
// evaluated before any lane moves, fails the statement (ErrFenced) when
// another daemon has taken over the round's instance.
const advancedCTE = `
WITH advanced AS (
    INSERT INTO counterd_instances AS ci (instance, last_seq, updated_at)
    SELECT l, $2::bigint, now() FROM unnest($1::text[]) AS l
    WHERE counterd_fence($1::text[])
    ORDER BY l
    ON CONFLICT (instance) DO UPDATE
    SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
    WHERE ci.last_seq < excluded.last_seq
    RETURNING ci.instance
)`

// writeHead is writeBatch's common table expressions.
const writeHead = advancedCTE + `, fresh AS (
    SELECT array_agg(l.name IN (SELECT instance FROM advanced) ORDER BY l.ord) AS lanes
    FROM unnest($1::text[]) WITH ORDINALITY AS l(name, ord)
), written AS (
    INSERT INTO counter_slots AS cs (key, slot, count, variance)
    SELECT b.key, coalesce(f.slot, b.fallback), b.n, b.v
    FROM unnest($3::text[], $4::bigint[], $5::float8[], $6::smallint[], $7::smallint[])
        AS b(key, n, v, fallback, lane)
    LEFT JOIN LATERAL (
        SELECT s.slot FROM counter_slots s
        WHERE s.key = b.key
        ORDER BY s.slot
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS f ON true
    WHERE $1::text[] IS NULL OR (SELECT lanes FROM fresh)[b.lane]
    ON CONFLICT (key, slot) DO UPDATE
    SET count = cs.count + excluded.count, variance = cs.variance + excluded.variance
    RETURNING cs.xmax = 0 AS created
)`
