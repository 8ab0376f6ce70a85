package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

// BenchmarkTake measures grants per second from one budget at 32
// concurrent unpipelined clients, in one run: counterd TAKE (one daemon,
// leased shares) against unpipelined INCR from the same clients to the
// same daemon (the target: TAKE ≥ 0.8× INCR), and the lock-free
// conditional update every client sends to PostgreSQL itself (seed 000's
// best single-database answer):
//
//	go test ./cmd/counterd -run '^$' -bench Take -benchtime 3s
func BenchmarkTake(b *testing.B) {
	const clients = 32
	db := pgtest.New(b, pgtest.Options{MaxConns: clients})
	if _, err := db.Pool.Exec(context.Background(), `SELECT budget_add('take', 1000000000000), budget_add('direct', 1000000000000)`); err != nil {
		b.Fatal(err)
	}
	d := startDaemon(b, db)
	// parallel runs n calls of op from the clients and returns the calls
	// per second.
	parallel := func(b *testing.B, n int, op func(ctx context.Context, worker int) error) float64 {
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		start := time.Now()
		for w := range clients {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := op(context.Background(), w); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return float64(n) / time.Since(start).Seconds()
	}
	conns := make([]*redis.Client, clients)
	for i := range conns {
		conns[i] = budgetClient(b, d.socket)
	}
	var granted atomic.Int64
	take := func(ctx context.Context, w int) error {
		n, err := conns[w].Do(ctx, "TAKE", "take").Int64()
		if err == nil && n != 1 {
			b.Errorf("TAKE replied %d", n)
		}
		granted.Add(n)
		return err
	}
	incr := func(ctx context.Context, w int) error {
		return conns[w].Do(ctx, "INCR", "incr").Err()
	}
	b.Run("counterd", func(b *testing.B) {
		b.ReportMetric(parallel(b, b.N, take), "grants/s")
	})
	// TAKE and INCR alternate in halves, each half of b.N calls, so both
	// see the same machine.
	b.Run("take-vs-incr", func(b *testing.B) {
		half := max(b.N/2, 1)
		var grants, incrs float64
		for range 2 {
			grants += parallel(b, half, take) / 2
			incrs += parallel(b, half, incr) / 2
		}
		b.ReportMetric(grants, "grants/s")
		b.ReportMetric(incrs, "incr/s")
		b.ReportMetric(grants/incrs, "take/incr")
	})
	// No overspend: once the daemon has stopped (and returned its
	// leases), the budget has granted exactly what TAKE replied.
	defer func() {
		d.stop()
		if got := readBudget(b, db.URL, "take"); got.granted != granted.Load() || got.leased != 0 {
			b.Errorf("budget after the TAKEs: granted %d, leased %d; want %d replied, 0", got.granted, got.leased, granted.Load())
		}
	}()
	b.Run("lock-free-update", func(b *testing.B) {
		b.ReportMetric(parallel(b, b.N, func(ctx context.Context, _ int) error {
			_, err := db.Pool.Exec(ctx, `UPDATE budgets SET granted = granted + 1
WHERE key = 'direct' AND total - granted - leased - forfeited >= 1`)
			return err
		}), "grants/s")
	})
}
