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
// leased shares) and the lock-free conditional update every client sends
// to PostgreSQL itself (seed 000's best single-database answer):
//
//	go test ./cmd/counterd -run '^$' -bench Take -benchtime 3s
func BenchmarkTake(b *testing.B) {
	const clients = 32
	db := pgtest.New(b, pgtest.Options{MaxConns: clients})
	if _, err := db.Pool.Exec(context.Background(), `SELECT budget_add('take', 1000000000000), budget_add('direct', 1000000000000)`); err != nil {
		b.Fatal(err)
	}
	d := startDaemon(b, db)
	parallel := func(b *testing.B, op func(ctx context.Context, worker int) error) {
		var left atomic.Int64
		left.Store(int64(b.N))
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
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "grants/s")
	}
	b.Run("counterd", func(b *testing.B) {
		conns := make([]*redis.Client, clients)
		for i := range conns {
			conns[i] = budgetClient(b, d.socket)
		}
		parallel(b, func(ctx context.Context, w int) error {
			n, err := conns[w].Do(ctx, "TAKE", "take").Int64()
			if err == nil && n != 1 {
				b.Errorf("TAKE replied %d", n)
			}
			return err
		})
	})
	b.Run("lock-free-update", func(b *testing.B) {
		parallel(b, func(ctx context.Context, _ int) error {
			_, err := db.Pool.Exec(ctx, `UPDATE budgets SET granted = granted + 1
WHERE key = 'direct' AND total - granted - leased - forfeited >= 1`)
			return err
		})
	})
}
