package budget

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
)

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// newTestManager returns a ready Manager whose grants are recorded at
// once (as if each were flushed), and the lease ids they were taken from.
func newTestManager(t *testing.T, db *pgtest.DB, clk *clock) (*Manager, func() []int64) {
	t.Helper()
	var mu sync.Mutex
	var leases []int64
	m := New(NewStore(db.Pool), Options{
		Holder: "h1",
		TTL:    30 * time.Second,
		Now:    clk.Now,
		Record: func(c change.Change) (func(context.Context) error, error) {
			mu.Lock()
			leases = append(leases, c.Bucket)
			mu.Unlock()
			// A round without lanes records every grant.
			err := pgx.BeginFunc(context.Background(), db.Pool, func(tx pgx.Tx) error {
				_, _, err := RecordGrants(context.Background(), tx, nil, Grants{Leases: []int64{c.Bucket}, Units: []int64{c.Delta}, Lanes: []int16{1}})
				return err
			})
			return func(context.Context) error { return nil }, err
		},
		Replayed: func(context.Context) error { return nil },
	})
	running(t, m)
	return m, func() []int64 { mu.Lock(); defer mu.Unlock(); return append([]int64(nil), leases...) }
}

// A lease past its deadline (its renewals failed) grants nothing more: the
// next TAKE takes a new lease.
func TestExpiredLeaseGrantsNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	clk := &clock{now: time.Now()}
	m, leases := newTestManager(t, db, clk)
	ctx := context.Background()
	if _, err := m.Add(ctx, "k", 1000); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if n, err := m.Take(ctx, "k", 1); n != 1 || err != nil {
			t.Fatalf("TAKE: %d, %v", n, err)
		}
	}
	clk.Add(31 * time.Second)
	if n, err := m.Take(ctx, "k", 1); n != 1 || err != nil {
		t.Fatalf("TAKE after the deadline: %d, %v", n, err)
	}
	got := leases()
	if len(got) != 3 || got[0] != got[1] || got[2] == got[1] {
		t.Errorf("grants came from leases %v; want the first two from one lease and the third from a new one", got)
	}
}

// Near zero, TAKE goes to PostgreSQL and sells every unit, even when this
// daemon's leases hold them in pieces smaller than n.
func TestTakeSellsOutExactly(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	m, _ := newTestManager(t, db, &clock{now: time.Now()})
	ctx := context.Background()
	const total = 203
	if _, err := m.Add(ctx, "k", total); err != nil {
		t.Fatal(err)
	}
	var sold int64
	for _, n := range []int64{1, 3, 1, 2} {
		for {
			got, err := m.Take(ctx, "k", n)
			if err != nil {
				t.Fatal(err)
			}
			if got == 0 {
				break
			}
			sold += got
		}
	}
	if sold != total {
		t.Errorf("sold %d of %d", sold, total)
	}
	tot, err := m.Read(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if tot.Granted != total {
		t.Errorf("totals %+v; want all %d granted", tot, total)
	}
}

// Reserve grants from a lease in hand only, and Unreserve puts a grant
// that was not journaled back into its lease.
func TestReserve(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	m, _ := newTestManager(t, db, &clock{now: time.Now()})
	ctx := context.Background()
	if _, err := m.Add(ctx, "k", 4*minLease); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Reserve("k", 1); ok {
		t.Fatal("Reserve granted with no lease in hand")
	}
	// The first TAKE leases minLease units, a quarter of the budget; the
	// rest is too small for another lease, so no prefetch adds one.
	if n, err := m.Take(ctx, "k", 1); n != 1 || err != nil {
		t.Fatalf("TAKE: %d, %v", n, err)
	}
	g, ok := m.Reserve("k", minLease-1)
	if !ok || g.Kind != change.Grant || g.Delta != minLease-1 || g.Bucket == 0 {
		t.Fatalf("Reserve from the lease: %+v, %v", g, ok)
	}
	if _, ok := m.Reserve("k", 1); ok {
		t.Fatal("Reserve granted beyond the lease")
	}
	m.Unreserve(g)
	if g2, ok := m.Reserve("k", minLease-1); !ok || g2.Bucket != g.Bucket {
		t.Fatalf("Reserve after Unreserve: %+v, %v; want the units back in lease %d", g2, ok, g.Bucket)
	}
}

// While PostgreSQL is down, TAKE keeps granting from the lease in hand,
// then replies ErrUnavailable (never 0, which means exhausted).
func TestTakeFromLeaseWhileDatabaseDown(t *testing.T) {
	t.Parallel()
	srv := pgtest.StartServer(t)
	db := pgtest.New(t, pgtest.Options{URL: srv.URL, MaxConns: 4})
	var mu sync.Mutex
	var recorded int64
	m := New(NewStore(db.Pool), Options{
		Holder: "h1",
		TTL:    time.Minute,
		Now:    (&clock{now: time.Now()}).Now,
		Record: func(c change.Change) (func(context.Context) error, error) {
			mu.Lock()
			recorded += c.Delta // the journal, which needs no database
			mu.Unlock()
			return func(context.Context) error { return nil }, nil
		},
		Replayed: func(context.Context) error { return nil },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the manager to recover its leases", m.Ready)
	if _, err := m.Add(ctx, "k", 1000); err != nil {
		t.Fatal(err)
	}
	if n, err := m.Take(ctx, "k", 1); n != 1 || err != nil {
		t.Fatalf("TAKE with PostgreSQL up: %d, %v", n, err)
	}
	srv.Stop("immediate")
	defer srv.Start() // for the schema's cleanup
	var granted int64
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatalf("%d grants with PostgreSQL down; a lease of a 1,000 budget is at most 250", granted)
		}
		tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := m.Take(tctx, "k", 1)
		tcancel()
		if err != nil {
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("TAKE after %d grants: %v; want ErrUnavailable", granted, err)
			}
			break
		}
		if n != 1 {
			t.Fatalf("TAKE with PostgreSQL down: %d; want 1 from the lease, or an error", n)
		}
		granted++
	}
	if granted == 0 {
		t.Error("no grant from the lease in hand while PostgreSQL was down (the first lease is at least 4 units)")
	}
	mu.Lock()
	defer mu.Unlock()
	if recorded != granted+1 {
		t.Errorf("recorded %d grants; want %d", recorded, granted+1)
	}
}
