package slots

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/counterd/counterd/internal/store"

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
// lane over up to s.writers transactions (one per minKeysPerWriter keys,
// and one while PostgreSQL keeps up: spread.go), run at once, or over
// more, that many at a time, for a batch past a few statements' worth
// (bound.go); each transaction records id for its lanes. A lane
// whose id (or a later one of the same generation) is already recorded is
// skipped, so a batch retried after some or all of its transactions
// committed, or replayed after a crash, is written once. On error some
// lanes may be committed; retry with the same id. Changes must be unique
// per change.ID, of kinds with a Writer (writer.go, kind_*.go); a key's
// changes share its lane and transaction.
func (s *Store) ApplyOnce(ctx context.Context, id store.BatchID, batch []change.Change) (store.ApplyResult, error) {
	// A small batch is written faster by one transaction than by several
	// that each pay a commit; identities are per lane, so the grouping
	// may change from batch to batch.
	start := time.Now()
	writers := s.spread.writers(s.writers, len(batch), start, store.Urgent(ctx))
	defer func() { s.spread.wrote(start, time.Since(start)) }()
	// A large round takes more transactions than writers, writers at a
	// time, so a retry skips the lanes of those that committed (bound.go).
	txs := s.transactions(writers, len(batch))
	parts := make([]part, txs)
	for l := range store.Lanes {
		p := &parts[l%txs]
		p.lanes = append(p.lanes, laneName(id.Identity, l))
	}
	// Size each part's changes first: growing them by append copied the
	// round about twice over (11% of the daemon's CPU at -P 16).
	lanes, sizes := make([]int, len(batch)), make([]int, txs)
	for i, c := range batch {
		// By the counter's key, not the change's: an INCRONCE view's Key
		// carries its visitor and window (change.Spec.Suffix), and views
		// of one key spread over a large round's transactions added to
		// the key's slot rows from each, so one waited for another past
		// lock_timeout and the round's attempts failed on themselves.
		lanes[i] = store.LaneOf(c.CounterKey())
		sizes[lanes[i]%txs]++
	}
	for w := range parts {
		parts[w].changes = make([]laneChange, 0, sizes[w])
	}
	for i, c := range batch {
		l := lanes[i]
		p := &parts[l%txs]
		// Lane l is the (l/txs)-th lane of its part; SQL arrays count
		// from 1.
		p.changes = append(p.changes, laneChange{Change: c, lane: int16(l/txs + 1)})
	}
	var (
		wg      sync.WaitGroup
		running = make(chan struct{}, writers)
		results = make([]store.ApplyResult, txs)
		errs    = make([]error, txs)
		doneAll = make([]bool, txs)
	)
	for w := range parts {
		wg.Go(func() {
			running <- struct{}{}
			defer func() { <-running }()
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
		if errs[w] != nil {
			continue // its outcomes are of a transaction rolled back
		}
		for id, o := range r.Outcomes {
			if res.Outcomes == nil {
				res.Outcomes = make(map[string]int64, len(r.Outcomes))
			}
			res.Outcomes[id] = o
		}
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
// same order, and writes it: in one statement when only inline writers
// have changes (writer.go), else in one transaction (writeTx). Deadlocks
// and serialization failures are retried. It reports whether every lane
// had already recorded seq.
func (s *Store) write(ctx context.Context, seq int64, p *part, res *store.ApplyResult) (bool, error) {
	p.changes = sortByKey(p.changes)
	pl, err := s.plan(p.changes, nil)
	if err != nil {
		return false, err
	}
	if pl.exec || len(p.changes) > s.rows {
		// A part past the statement bound is written in pieces
		// (inlineInTx), so in a transaction.
		return s.writeTx(ctx, seq, p, res)
	}
	parts, args := s.inlineArgs(pl, p.lanes, seq)
	var doneLanes int
	err = s.retry(ctx, &res.Attempts, func() error {
		expiring := s.expiring.Load()
		if p.lanes == nil && !expiring {
			// Without lanes nothing can hold the write back: ask first.
			var err error
			if expiring, err = s.anyExpiry(ctx); err != nil { // expire.go
				return err
			}
		}
		var held bool
		err := s.roundRow(ctx, s.ws.statement(parts, expiring), args, &res.Updated, &res.Inserted, &doneLanes, &held) // fault.go
		if err != nil || !held || p.lanes == nil {
			return err
		}
		// The first expiry: the statement moved no lane and wrote nothing.
		s.expiring.Store(true)
		return s.roundRow(ctx, s.ws.statement(parts, true), args, &res.Updated, &res.Inserted, &doneLanes, &held)
	})
	if err != nil {
		return false, fmt.Errorf("write batch (attempt %d): %w", res.Attempts, err)
	}
	return p.lanes != nil && doneLanes == len(p.lanes), nil
}

// writeTx writes p (sorted by key) in one transaction: it advances the
// lanes, then, for the changes of lanes that had not seen seq, runs every
// writer (runWriters).
func (s *Store) writeTx(ctx context.Context, seq int64, p *part, res *store.ApplyResult) (bool, error) {
	var doneAll bool
	err := s.retry(ctx, &res.Attempts, func() error {
		*res = store.ApplyResult{Attempts: res.Attempts}
		var err error
		doneAll, err = s.writeTxOnce(ctx, seq, p, res)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("write batch (attempt %d): %w", res.Attempts, err)
	}
	return doneAll, nil
}

func (s *Store) writeTxOnce(ctx context.Context, seq int64, p *part, res *store.ApplyResult) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	var fresh []bool
	if p.lanes != nil {
		if err := tx.QueryRow(ctx, advanceLanes, p.lanes, seq).Scan(&fresh); err != nil {
			return false, err
		}
	}
	pl, err := s.plan(p.changes, fresh)
	if err != nil {
		return false, err
	}
	if err := s.runWriters(ctx, tx, pl, res); err != nil {
		return false, err
	}
	if err := s.fault(); err != nil { // a test's (fault.go)
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, err
	}
	doneAll := fresh != nil
	for _, f := range fresh {
		doneAll = doneAll && !f
	}
	return doneAll, nil
}

// advanceLanes moves the watermark of each lane in $1 to $2 where it was
// below, and says per lane whether it moved (the round statement's
// advanced and fresh).
const advanceLanes = advancedCTE + `
SELECT array_agg(l.name IN (SELECT instance FROM advanced) ORDER BY l.ord)
FROM unnest($1::text[]) WITH ORDINALITY AS l(name, ord)`

// advancedCTE moves the watermark of each lane in $1 to $2 where it was
// below and returns the lanes it moved. counterd_fence, a one-time filter
// evaluated before any lane moves, fails the statement (ErrFenced) when
// another daemon has taken over the round's instance.
const advancedCTE = `
WITH advanced AS (` + advancedInsert + `
    ORDER BY l` + advancedUpsert

// advancedUnlessExpiry is advancedCTE moving no lane while any key has an
// expiry (expiryHeld): the round statement without resetExpired is then
// a no-op its caller runs again with it, decided at the statement's own
// snapshot and without a statement of its own (expire.go, anyExpiry).
const advancedUnlessExpiry = `
WITH advanced AS (` + advancedInsert + `
      AND NOT ` + expiryHeld + `
    ORDER BY l` + advancedUpsert

// expiryHeld is whether any key has an expiry.
const expiryHeld = `EXISTS (SELECT FROM counter_expiry)`

const advancedInsert = `
    INSERT INTO counterd_instances AS ci (instance, last_seq, updated_at)
    SELECT l, $2::bigint, now() FROM unnest($1::text[]) AS l
    WHERE counterd_fence($1::text[])`

const advancedUpsert = `
    ON CONFLICT (instance) DO UPDATE
    SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
    WHERE ci.last_seq < excluded.last_seq
    RETURNING ci.instance
)`

// freshCTE says, per lane of $1, whether advanced moved it: the round
// statement writes a change only if its lane is fresh (a null $1 writes
// every change without identity). It is a one-off InitPlan rather than a
// join, so the executor still takes one key at a time.
const freshCTE = `, fresh AS (
    SELECT array_agg(l.name IN (SELECT instance FROM advanced) ORDER BY l.ord) AS lanes
    FROM unnest($1::text[]) WITH ORDINALITY AS l(name, ord)
)`
