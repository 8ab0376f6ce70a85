// Package storetest is the conformance suite every store.Store passes:
// Exercise runs the contract of internal/store (exactly-once rounds,
// replays, reads with pending rounds, every kind, overflow, SET and
// EXPIRE ordering, budget grants, concurrent writers, fencing, writes
// failed before commit) as parallel subtests against stores a Harness
// opens.
//
// The one idea to hold first: the suite sees a store only through
// store.Store and the few operations of Store below that a daemon never
// calls but a test needs (fold, a partly committed round, a takeover, a
// budget lease, a write that fails before it commits). A new store
// implements those in its own test package, usually in a few lines over
// its own setup, and calls Exercise:
//
//	func TestConformance(t *testing.T) {
//		t.Parallel()
//		storetest.Exercise(t, harness{})
//	}
//
// Production code never imports this package.
package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Harness opens the stores the suite runs against.
type Harness interface {
	// Open returns a new, empty store, ready to write (its schema
	// migrated), that shares nothing with any other store Open returned;
	// it is closed and removed when t ends. Subtests call it in
	// parallel, once each.
	Open(t *testing.T) Store
}

// Store is a store under test: store.Store and what the suite needs
// beyond it.
type Store interface {
	store.Store

	// Fold runs the store's own background work once (for PostgreSQL,
	// the rollup's fold of slot rows into base and bucket rows): no
	// read may change because of it, and Overflows counts a total
	// beyond int64 after it at the latest. A store with no such work
	// returns nil.
	Fold(ctx context.Context) error

	// CommitLanes leaves the database as a round that failed part way
	// leaves it: the changes of batch whose keys are in lanes are
	// written and those lanes record id; every other lane keeps its
	// watermark and nothing of its keys is written.
	CommitLanes(ctx context.Context, id store.BatchID, batch []change.Change, lanes []int) error

	// Claim makes a daemon of generation id.Generation the owner of
	// id.Instance, as a daemon taking the instance over does at start
	// (internal/owner): rounds of any other generation of the instance
	// are fenced from then on.
	Claim(ctx context.Context, id store.Identity) error

	// Lease adds to budget key and leases units of it to one daemon,
	// returning the lease's id (a change.Grant's Bucket).
	Lease(ctx context.Context, key string, units int64) (lease int64, err error)

	// Budget returns budget key's units granted and units leased.
	Budget(ctx context.Context, key string) (granted, leased int64, err error)

	// FailWrites makes every write of a round fail with err at the last
	// moment it can: after the write advanced its lanes' watermarks and
	// wrote its changes, inside the transaction that must commit them
	// together, before it commits (for PostgreSQL, a connection lost at
	// COMMIT). FailWrites(nil) ends it. The suite calls it only while
	// no round is being written.
	FailWrites(err error)
}

// Exercise runs the whole suite against stores h opens. Every subtest
// runs in parallel with the others, each on its own store.
func Exercise(t *testing.T, h Harness) {
	t.Helper()
	for _, g := range []struct {
		name  string
		tests []subtest
	}{
		{"ExactlyOnce", exactlyOnce},
		{"Replay", replay},
		{"ReadWithPending", readWithPending},
		{"Kinds", slices.Concat(kinds, uniqueKinds)},
		{"Overflow", overflow},
		{"SetExpire", setExpire},
		{"Grants", grants},
		{"Concurrent", concurrent},
		{"Fenced", fenced},
		{"Faults", faults},
	} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, st := range g.tests {
				t.Run(st.name, func(t *testing.T) {
					t.Parallel()
					st.run(t, h.Open(t))
				})
			}
		})
	}
}

// subtest is one contract check, run on a fresh store.
type subtest struct {
	name string
	run  func(t *testing.T, s Store)
}
