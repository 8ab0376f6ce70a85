package slots

import (
	"context"
	"fmt"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/cluster"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/store/storetest"
)

// The store of a PL/Proxy cluster's partitions passes the store
// conformance suite, with 2 and 4 partitions.
func TestClusterConformance(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%dparts", n), func(t *testing.T) {
			t.Parallel()
			storetest.Exercise(t, clusterHarness{n: n})
		})
	}
}

type clusterHarness struct{ n int }

func (h clusterHarness) Open(t *testing.T) storetest.Store {
	c := pgtest.NewCluster(t, h.n, pgtest.Options{MaxConns: 8})
	cs := &clusterStore{}
	parts := make([]cluster.Part, h.n)
	for i, db := range c.Parts {
		s, err := New(db.Pool, Options{Slots: 4, Kinds: testKinds()})
		if err != nil {
			t.Fatal(err)
		}
		cs.parts = append(cs.parts, &pgStore{Store: s, db: db})
		parts[i] = s
	}
	var err error
	if cs.Store, err = cluster.New(parts); err != nil {
		t.Fatal(err)
	}
	return cs
}

// clusterStore is the cluster's store with each partition's test
// operations (pgStore's).
type clusterStore struct {
	*cluster.Store
	parts []*pgStore
}

func (s *clusterStore) each(fn func(p *pgStore) error) error {
	for i, p := range s.parts {
		if err := fn(p); err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
	}
	return nil
}

func (s *clusterStore) Fold(ctx context.Context) error {
	return s.each(func(p *pgStore) error { return p.Fold(ctx) })
}

// CommitLanes commits lanes' share of the round on every partition.
func (s *clusterStore) CommitLanes(ctx context.Context, id store.BatchID, batch []change.Change, lanes []int) error {
	for i, p := range s.parts {
		var part []change.Change
		for _, c := range batch {
			if cluster.Partition(c.Key, len(s.parts)) == i {
				part = append(part, c)
			}
		}
		if err := p.CommitLanes(ctx, id, part, lanes); err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
	}
	return nil
}

func (s *clusterStore) Claim(ctx context.Context, id store.Identity) error {
	return s.each(func(p *pgStore) error { return p.Claim(ctx, id) })
}

func (s *clusterStore) Lease(ctx context.Context, key string, units int64) (int64, error) {
	return s.parts[cluster.Partition(key, len(s.parts))].Lease(ctx, key, units)
}

func (s *clusterStore) Budget(ctx context.Context, key string) (granted, leased int64, err error) {
	return s.parts[cluster.Partition(key, len(s.parts))].Budget(ctx, key)
}

// FailWrites fails the writes of every partition.
func (s *clusterStore) FailWrites(err error) {
	for _, p := range s.parts {
		p.FailWrites(err)
	}
}
