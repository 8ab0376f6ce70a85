package slots

// The write fault: a test seam, so the conformance suite can fail a
// round where only a transaction protects it. While failAfterLanes is
// set (by the test harness, between rounds), every transaction of a
// round calls it after it advanced its lanes' watermarks and wrote its
// changes, and an error from it rolls the transaction back, as a
// connection lost at COMMIT does. Anything a change of the write path
// does outside the round's transaction (on the pool) commits anyway,
// and the retry of the round then skips or repeats its changes.

import (
	"context"
)

// fault returns the test's fault, nil when none is set.
func (s *Store) fault() error {
	if s.failAfterLanes == nil {
		return nil
	}
	return s.failAfterLanes()
}

// roundRow runs an inline round's statement and scans its one row into
// dest. In production the statement is its own transaction, on the pool.
// While a fault is set, it runs in a transaction of its own that calls
// the fault after the statement moved the lanes and wrote: the inline
// path is held to the same rule as the transaction path, that a round
// either commits its lanes with its changes or neither.
func (s *Store) roundRow(ctx context.Context, sql string, args []any, dest ...any) error {
	if s.failAfterLanes == nil {
		return s.pool.QueryRow(ctx, sql, args...).Scan(dest...)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	if err := tx.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		return err
	}
	if err := s.fault(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
