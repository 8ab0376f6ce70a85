package slots

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/budget"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/owner"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/store/storetest"
)

// The PostgreSQL store passes the store conformance suite.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, pgHarness{})
}

// pgHarness opens a Store over a fresh schema of the test server.
type pgHarness struct{}

func (pgHarness) Open(t *testing.T) storetest.Store {
	db := pgtest.New(t, pgtest.Options{})
	// Few slots, so concurrent writers of a key share slot rows.
	s, err := New(db.Pool, Options{Slots: 4, Kinds: testKinds()})
	if err != nil {
		t.Fatal(err)
	}
	return &pgStore{Store: s, db: db}
}

type pgStore struct {
	*Store
	db *pgtest.DB
}

// Fold folds totals and buckets in small chunks, as a rollup pass does.
func (s *pgStore) Fold(ctx context.Context) error {
	if _, err := s.Store.Fold(ctx, FoldOptions{Chunk: 3}); err != nil {
		return err
	}
	_, err := s.FoldBuckets(ctx, FoldOptions{Chunk: 3})
	return err
}

// CommitLanes writes lanes' share of the round, which records id in
// every lane, then puts every other lane's watermark back.
func (s *pgStore) CommitLanes(ctx context.Context, id store.BatchID, batch []change.Change, lanes []int) error {
	before, err := s.marks(ctx, []store.Identity{id.Identity})
	if err != nil {
		return err
	}
	var part []change.Change
	for _, c := range batch {
		if slices.Contains(lanes, store.LaneOf(c.Key)) {
			part = append(part, c)
		}
	}
	if _, err := s.ApplyOnce(ctx, id, part); err != nil {
		return err
	}
	for l := range store.Lanes {
		if slices.Contains(lanes, l) {
			continue
		}
		q := `UPDATE counterd_instances SET last_seq = $2 WHERE instance = $1`
		if before[0][l] == 0 {
			q = `DELETE FROM counterd_instances WHERE instance = $1 AND $2::bigint = 0`
		}
		if _, err := s.db.Pool.Exec(ctx, q, laneName(id.Identity, l), int64(before[0][l])); err != nil {
			return fmt.Errorf("put lane %d back: %w", l, err)
		}
	}
	return nil
}

func (s *pgStore) Claim(ctx context.Context, id store.Identity) error {
	c := owner.Claim{Instance: id.Instance, Generation: id.Generation, Dir: "/storetest", DirID: "storetest", Host: "h", PID: 1}
	_, err := owner.Acquire(ctx, s.db.Pool, c, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return err
}

// Lease adds four times units to the budget, since a lease takes at most
// a quarter of the remainder.
func (s *pgStore) Lease(ctx context.Context, key string, units int64) (int64, error) {
	b := budget.NewStore(s.db.Pool)
	if _, err := b.Add(ctx, key, 4*units); err != nil {
		return 0, err
	}
	lease, size, err := b.Lease(ctx, key, "storetest", 0, units, units, time.Hour)
	if err == nil && size != units {
		err = fmt.Errorf("leased %d units; want %d", size, units)
	}
	return lease, err
}

func (s *pgStore) Budget(ctx context.Context, key string) (granted, leased int64, err error) {
	t, err := budget.NewStore(s.db.Pool).Read(ctx, key)
	return t.Granted, t.Leased, err
}

func (s *pgStore) FailWrites(err error) {
	if err == nil {
		s.failAfterLanes = nil
		return
	}
	s.failAfterLanes = func() error { return err }
}
