package slots

import "github.com/counterd/counterd/internal/store"

// Bounded work. A round after an outage can hold millions of changes
// (a 26 s outage under load built a round of a million keys, two million
// INCRONCE views in a trial), and one statement over all of them outlived
// statement_timeout and the round's deadline on every attempt, each retry
// repeating the same statement. So no statement of a round takes more than
// the store's statement bound of rows (Options.StatementRows), and a large
// round is split over more transactions than it has writers, run that many
// at a time, so that the lanes of those that committed are skipped by a
// retry (exactly once per lane: a lane's watermark still moves in the
// transaction that writes its changes).

// DefaultStatementRows is the default bound on the changes one statement
// of a round writes: about a second of PostgreSQL's work on a loaded
// 2-core machine (a million INCRONCE views took 22 s in statements of
// half a million), while a paced round split over the default two
// writers (up to COUNTERD_FLUSH_MAX_KEYS, 100,000 keys) is still one
// statement per transaction.
const DefaultStatementRows = 50000

// statementsPerTx is how many statements' worth of changes a transaction
// of a large round takes: its share of a round's lanes is written and
// committed in a few seconds, so a deadline cuts off little of it.
const statementsPerTx = 4

// transactions returns how many transactions a batch of n changes is
// split into when writers run at once: writers, or more (up to one per
// lane) so that none takes more than statementsPerTx statements' worth.
func (s *Store) transactions(writers, n int) int {
	per := statementsPerTx * s.rows
	return max(writers, min(store.Lanes, (n+per-1)/per))
}

// pieces calls fn on consecutive pieces [lo, hi) of n items, of at most
// size items each, in order, and stops at its first error. A piece ends
// where an item starts a new group (!same(i): a new key) when one does in
// its second half, so a group is rarely split, never unboundedly kept
// whole.
func pieces(n, size int, same func(i int) bool, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; {
		hi := n
		if n-lo > size {
			hi = lo + size
			for e := hi; e > lo+size/2; e-- {
				if !same(e) {
					hi = e
					break
				}
			}
		}
		if err := fn(lo, hi); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}
