package budget

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
)

// lockTimeouts counts statements PostgreSQL canceled at lock_timeout.
type lockTimeouts struct{ n atomic.Int64 }

func (l *lockTimeouts) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (l *lockTimeouts) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	var pgErr *pgconn.PgError
	if errors.As(data.Err, &pgErr) && pgErr.Code == "55P03" {
		l.n.Add(1)
	}
}

// A TAKE whose lease waits past lock_timeout behind a budget row that
// another transaction holds (a round recording grants on a slow disk) is
// tried again within the command's deadline, and is granted once the row
// is free. Before, the first lock timeout answered "budget unavailable"
// (seen in the cashback example on a loaded machine).
func TestTakeWaitsOutALockTimeout(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	if _, err := NewStore(db.Pool).Add(ctx, "gift", 1000); err != nil {
		t.Fatal(err)
	}

	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "20ms"
	timeouts := new(lockTimeouts)
	cfg.ConnConfig.Tracer = timeouts
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	m := New(NewStore(pool), Options{
		Holder: "h1",
		TTL:    time.Minute,
		Record: func(change.Change) (func(context.Context) error, error) {
			return func(context.Context) error { return nil }, nil
		},
		Replayed: func(context.Context) error { return nil },
	})
	running(t, m)

	holder, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `SELECT 1 FROM budgets WHERE key = 'gift' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	taken := make(chan result, 1)
	go func() {
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		n, err := m.Take(tctx, "gift", 1)
		taken <- result{n, err}
	}()
	// Release the row once the lease has timed out on it twice, unless
	// TAKE gave up first.
	for timeouts.n.Load() < 2 {
		select {
		case r := <-taken:
			t.Fatalf("TAKE behind a locked budget row: %d, %v; want it granted once the row is free", r.n, r.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-taken; r.n != 1 || r.err != nil {
		t.Fatalf("TAKE after the row was freed: %d, %v; want 1", r.n, r.err)
	}
}
