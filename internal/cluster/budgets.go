package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/budget"
)

// Budgets keeps each budget, its leases and each sequence on its key's
// partition. Lease ids are unique across the cluster: partition p's
// identity column hands out ids p+1, p+1+n, p+1+2n... (NumberLeases), so
// an id names its partition and the methods that take ids (GiveBack) or
// a holder (Renew, Reclaim...) find every lease.
type Budgets struct {
	parts []*budget.Store
}

// NewBudgets returns the budgets over parts, in partition order.
func NewBudgets(parts []*budget.Store) *Budgets { return &Budgets{parts: parts} }

var _ budget.Backend = (*Budgets)(nil)

func (b *Budgets) of(key string) *budget.Store { return b.parts[Partition(key, len(b.parts))] }

// leasePart is the partition of lease id.
func (b *Budgets) leasePart(id int64) int { return int((id - 1) % int64(len(b.parts))) }

func (b *Budgets) Add(ctx context.Context, key string, n int64) (int64, error) {
	return b.of(key).Add(ctx, key, n)
}

func (b *Budgets) Read(ctx context.Context, key string) (budget.Totals, error) {
	return b.of(key).Read(ctx, key)
}

func (b *Budgets) Take(ctx context.Context, key string, n int64) (bool, error) {
	return b.of(key).Take(ctx, key, n)
}

func (b *Budgets) Lease(ctx context.Context, key, holder string, request, w, floor int64, ttl time.Duration) (int64, int64, error) {
	return b.of(key).Lease(ctx, key, holder, request, w, floor, ttl)
}

func (b *Budgets) NextRange(ctx context.Context, key string, n int64) (int64, error) {
	return b.of(key).NextRange(ctx, key, n)
}

// GiveBack gives each lease back on its partition.
func (b *Budgets) GiveBack(ctx context.Context, ids, units []int64) error {
	byPart := make(map[int][2][]int64)
	for i, id := range ids {
		p := b.leasePart(id)
		g := byPart[p]
		g[0], g[1] = append(g[0], id), append(g[1], units[i])
		byPart[p] = g
	}
	ps := make([]int, 0, len(byPart))
	for p := range byPart {
		ps = append(ps, p)
	}
	return each(ps, func(p int) error { return b.parts[p].GiveBack(ctx, byPart[p][0], byPart[p][1]) })
}

// ReturnLost looks on every partition.
func (b *Budgets) ReturnLost(ctx context.Context, holder string, requests []int64) ([]int64, int64, error) {
	found := make([][]int64, len(b.parts))
	units := make([]int64, len(b.parts))
	err := each(b.all(), func(p int) error {
		var err error
		found[p], units[p], err = b.parts[p].ReturnLost(ctx, holder, requests)
		return err
	})
	var all []int64
	var sum int64
	for p := range b.parts {
		all, sum = append(all, found[p]...), sum+units[p]
	}
	return all, sum, err
}

func (b *Budgets) Reclaim(ctx context.Context, holder string) (int, int64, error) {
	leases := make([]int, len(b.parts))
	units := make([]int64, len(b.parts))
	err := each(b.all(), func(p int) error {
		var err error
		leases[p], units[p], err = b.parts[p].Reclaim(ctx, holder)
		return err
	})
	var n int
	var sum int64
	for p := range b.parts {
		n, sum = n+leases[p], sum+units[p]
	}
	return n, sum, err
}

func (b *Budgets) Renew(ctx context.Context, holder string, ttl time.Duration) ([]int64, error) {
	ids := make([][]int64, len(b.parts))
	err := each(b.all(), func(p int) error {
		var err error
		ids[p], err = b.parts[p].Renew(ctx, holder, ttl)
		return err
	})
	var all []int64
	for _, x := range ids {
		all = append(all, x...)
	}
	return all, err
}

func (b *Budgets) Forfeit(ctx context.Context) (int64, error) {
	ns := make([]int64, len(b.parts))
	err := each(b.all(), func(p int) error {
		var err error
		ns[p], err = b.parts[p].Forfeit(ctx)
		return err
	})
	var sum int64
	for _, n := range ns {
		sum += n
	}
	return sum, err
}

func (b *Budgets) Prune(ctx context.Context, holder string) error {
	return each(b.all(), func(p int) error { return b.parts[p].Prune(ctx, holder) })
}

func (b *Budgets) all() []int {
	ps := make([]int, len(b.parts))
	for i := range ps {
		ps[i] = i
	}
	return ps
}

// NumberLeases makes partition p of n hand out lease ids p+1, p+1+n,
// p+1+2n... (above every id it has handed out), unless it already does.
// The statement is built from integers of ours, never from key text.
func NumberLeases(ctx context.Context, pool *pgxpool.Pool, p, n int) error {
	var inc, start, maxID int64
	err := pool.QueryRow(ctx, `
SELECT q.seqincrement, q.seqstart, (SELECT coalesce(max(id), 0) FROM budget_leases)
  FROM pg_sequence q
 WHERE q.seqrelid = pg_get_serial_sequence('budget_leases', 'id')::regclass`).Scan(&inc, &start, &maxID)
	if err != nil {
		return fmt.Errorf("partition %d: read the lease id sequence: %w", p, err)
	}
	if inc == int64(n) && (start-1)%int64(n) == int64(p) {
		return nil
	}
	start = (maxID/int64(n)+1)*int64(n) + int64(p) + 1
	if _, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE budget_leases ALTER COLUMN id SET INCREMENT BY %d SET START WITH %d RESTART WITH %d`, n, start, start)); err != nil {
		return fmt.Errorf("partition %d: number lease ids: %w", p, err)
	}
	return nil
}
