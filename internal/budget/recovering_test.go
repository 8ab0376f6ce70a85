package budget

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
)

// While a restarted daemon's leases of its earlier run are not returned
// (its replayed journal is not recorded yet), a TAKE the unleased
// remainder cannot cover but those leases could is ErrLeasesNotReturned,
// not 0: before, it answered 0, sold out, for as long as the replay took.
// A TAKE the remainder covers is granted, one that even every leased unit
// could not cover is 0, and once the leases are returned the first TAKE
// is granted.
func TestTakeWhileEarlierLeasesNotReturned(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st := NewStore(db.Pool)
	ctx := context.Background()
	if _, err := st.Add(ctx, "k", 100); err != nil {
		t.Fatal(err)
	}
	// The earlier run of holder h1 leased a quarter, 25 units, and stopped
	// without returning it.
	if id, size, err := st.Lease(ctx, "k", "h1", 1, 100, 1, time.Minute); err != nil || size != 25 {
		t.Fatalf("earlier run's lease: id %d, size %d, %v; want 25 units", id, size, err)
	}
	replayed := make(chan struct{})
	m := New(st, Options{
		Holder: "h1",
		TTL:    time.Minute,
		Record: func(change.Change) (func(context.Context) error, error) {
			return func(context.Context) error { return nil }, nil
		},
		// The replay is recorded when the test says so.
		Replayed: func(ctx context.Context) error {
			select {
			case <-replayed:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { m.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })

	take := func(what string, n, want int64, wantErr error) {
		t.Helper()
		got, err := m.Take(ctx, "k", n)
		if got != want || !errors.Is(err, wantErr) {
			t.Fatalf("%s: TAKE k %d = %d, %v; want %d, %v", what, n, got, err, want, wantErr)
		}
	}
	take("the remainder covers it", 5, 5, nil)
	// 70 unleased, 25 in the earlier lease.
	take("only with the earlier lease", 80, 0, ErrLeasesNotReturned)
	take("not even with every lease", 96, 0, nil)
	if m.Ready() {
		t.Fatal("ready before the replay was recorded")
	}
	close(replayed)
	waitFor(t, "the manager to return the earlier leases", m.Ready)
	take("the earlier lease returned", 80, 80, nil)
	tot, err := m.Read(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if tot != (Totals{Remaining: 15, Granted: 85, Total: 100}) {
		t.Errorf("totals %+v; want 85 granted, 15 remaining, nothing leased", tot)
	}
}
