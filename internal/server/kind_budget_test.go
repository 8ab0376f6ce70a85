package server

import (
	"context"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/budget"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/pgtest"
)

// A TAKE that only this daemon's leases of an earlier run could cover,
// while they are not returned yet, is answered -TRYAGAIN ...; not
// granted, a retryable refusal, not 0 (sold out); once they are returned
// it is granted. Against PostgreSQL.
func TestTakeTryAgainWhileEarlierLeasesNotReturned(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st := budget.NewStore(db.Pool)
	ctx := context.Background()
	if _, err := st.Add(ctx, "k", 100); err != nil {
		t.Fatal(err)
	}
	// The earlier run of holder h1 leased 25 units and stopped.
	if _, size, err := st.Lease(ctx, "k", "h1", 1, 100, 1, time.Minute); err != nil || size != 25 {
		t.Fatalf("earlier run's lease: %d units, %v; want 25", size, err)
	}
	replayed := make(chan struct{})
	b := budget.New(st, budget.Options{
		Holder: "h1",
		Record: func(change.Change) (func(context.Context) error, error) {
			return func(context.Context) error { return nil }, nil
		},
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
	ran := make(chan struct{})
	go func() { b.Run(runCtx); close(ran) }()
	t.Cleanup(func() { stop(); <-ran })

	for _, mode := range ioModes {
		t.Run(mode, func(t *testing.T) {
			s := New(pending.New(emptyStore{}, pending.Options{}), Options{IO: mode, Budgets: b, Timeout: time.Minute})
			c := dialLoop(t, serveUnix(t, s))
			c.send("TAKE k 80\r\n")
			c.expect("-TRYAGAIN budget leases of an earlier run are not returned yet (the daemon is recovering them), retry shortly; not granted\r\n")
		})
	}
	close(replayed)
	for deadline := time.Now().Add(time.Minute); !b.Ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the earlier leases were not returned within a minute")
		}
	}
	c := dialLoop(t, serveUnix(t, New(pending.New(emptyStore{}, pending.Options{}), Options{Budgets: b, Timeout: time.Minute})))
	c.send("TAKE k 80\r\n")
	c.expect(":80\r\n")
}
