package budget

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// countingBackend counts the maintenance statements a Manager sends.
type countingBackend struct {
	Backend
	renews, forfeits, prunes atomic.Int64
}

func (b *countingBackend) Renew(ctx context.Context, holder string, ttl time.Duration) ([]int64, error) {
	b.renews.Add(1)
	return b.Backend.Renew(ctx, holder, ttl)
}

func (b *countingBackend) Forfeit(ctx context.Context) (int64, error) {
	b.forfeits.Add(1)
	return b.Backend.Forfeit(ctx)
}

func (b *countingBackend) Prune(ctx context.Context, holder string) error {
	b.prunes.Add(1)
	return b.Backend.Prune(ctx, holder)
}

// TestIdleManagerSendsNoMaintenance: a daemon that never took from a
// budget renews, forfeits and prunes nothing (in a fleet every daemon
// did, three transactions per daemon every TTL/3); once it takes, it
// does.
func TestIdleManagerSendsNoMaintenance(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	if _, err := NewStore(db.Pool).Add(ctx, "b", 100); err != nil {
		t.Fatal(err)
	}
	be := &countingBackend{Backend: NewStore(db.Pool)}
	m := New(be, Options{Holder: "h1", TTL: 300 * time.Millisecond, Replayed: func(context.Context) error { return nil }})
	// renew runs from Run's ticker; call it as the ticker would.
	m.renew(ctx)
	if n := be.renews.Load() + be.forfeits.Load() + be.prunes.Load(); n != 0 {
		t.Fatalf("an idle manager sent %d maintenance statements; want 0", n)
	}
	m.mu.Lock()
	m.keys["b"] = &budgetKey{}
	m.mu.Unlock()
	m.renew(ctx)
	if be.renews.Load() != 1 || be.forfeits.Load() != 1 || be.prunes.Load() != 1 {
		t.Errorf("a manager with a budget in use: renews %d, forfeits %d, prunes %d; want 1 each",
			be.renews.Load(), be.forfeits.Load(), be.prunes.Load())
	}
}
