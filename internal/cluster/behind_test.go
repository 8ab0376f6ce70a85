package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/cluster"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// outage is a real partition's store that fails every round while down,
// and records the rounds it wrote, in order.
type outage struct {
	*slots.Store
	mu    sync.Mutex
	down  bool
	wrote []uint64
}

var errDown = errors.New("partition down")

func (o *outage) ApplyOnce(ctx context.Context, id store.BatchID, batch []change.Change) (store.ApplyResult, error) {
	o.mu.Lock()
	down := o.down
	o.mu.Unlock()
	if down {
		return store.ApplyResult{}, errDown
	}
	res, err := o.Store.ApplyOnce(ctx, id, batch)
	if err == nil {
		o.mu.Lock()
		o.wrote = append(o.wrote, id.Seq)
		o.mu.Unlock()
	}
	return res, err
}

func (o *outage) set(down bool) {
	o.mu.Lock()
	o.down = down
	o.mu.Unlock()
}

// TestPartitionDownHoldsBackOnlyItsKeys: while partition 1 fails, rounds
// commit on partition 0 and report store.ErrPartial; partition 1 gets
// its parts in round order once it is back, and every total is exact.
func TestPartitionDownHoldsBackOnlyItsKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.NewCluster(t, 2, pgtest.Options{})
	parts := make([]cluster.Part, 2)
	outs := make([]*outage, 2)
	for i, db := range c.Parts {
		s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 2})
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = &outage{Store: s}
		parts[i] = outs[i]
	}
	st, err := cluster.New(parts)
	if err != nil {
		t.Fatal(err)
	}
	// keys[p] are keys of partition p.
	var keys [2][]string
	for i := 0; len(keys[0]) < 3 || len(keys[1]) < 3; i++ {
		k := fmt.Sprintf("k%d", i)
		keys[cluster.Partition(k, 2)] = append(keys[cluster.Partition(k, 2)], k)
	}
	id := func(seq uint64) store.BatchID {
		return store.BatchID{Identity: store.Identity{Instance: "i", Generation: "g"}, Seq: seq}
	}
	inc := func(k string, n int64) change.Change { return change.Change{Key: k, Kind: change.Plain(), Delta: n} }
	rounds := [][]change.Change{
		{inc(keys[0][0], 1), inc(keys[1][0], 10)},
		{inc(keys[0][0], 2), inc(keys[1][0], 20), inc(keys[1][1], 5)},
		{inc(keys[0][1], 3)}, // nothing of partition 1's
	}
	outs[1].set(true)
	for i, r := range rounds {
		_, err := st.ApplyOnce(ctx, id(uint64(i+1)), r)
		wantPartial := i < 2
		if got := errors.Is(err, store.ErrPartial); got != wantPartial {
			t.Fatalf("round %d while partition 1 is down: %v; want partial %v", i+1, err, wantPartial)
		}
	}
	if got := totals(t, st, keys[0][0], keys[0][1]); !slices.Equal(got, []int64{3, 3}) {
		t.Errorf("partition 0's keys while partition 1 is down: %v; want [3 3]", got)
	}
	if b := st.Behind(); len(b) != 1 || b[1].Seq != 1 {
		t.Errorf("Behind() = %v; want partition 1 on round 1", b)
	}
	// Back: round 2 first must not write partition 1 before round 1.
	outs[1].set(false)
	if _, err := st.ApplyOnce(ctx, id(2), rounds[1]); !errors.Is(err, store.ErrPartial) {
		t.Fatalf("round 2 before round 1: %v; want partial", err)
	}
	for i := range 2 {
		if _, err := st.ApplyOnce(ctx, id(uint64(i+1)), rounds[i]); err != nil {
			t.Fatalf("round %d again: %v", i+1, err)
		}
	}
	if got := outs[1].wrote; !slices.Equal(got, []uint64{1, 2}) {
		t.Errorf("partition 1 wrote rounds %v; want [1 2]", got)
	}
	got := totals(t, st, keys[0][0], keys[0][1], keys[1][0], keys[1][1])
	if want := []int64{3, 3, 30, 5}; !slices.Equal(got, want) {
		t.Errorf("totals %v; want %v", got, want)
	}
	if b := st.Behind(); len(b) != 0 {
		t.Errorf("Behind() = %v after catching up", b)
	}
}

func totals(t *testing.T, s store.Store, keys ...string) []int64 {
	t.Helper()
	snap, err := s.Read(context.Background(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(keys))
	for i, e := range snap.Estimates {
		out[i] = e.Total
	}
	return out
}
