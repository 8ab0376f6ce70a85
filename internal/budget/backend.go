package budget

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Backend is where budgets, their leases and sequences are kept: Store,
// one database's tables, or a store over a cluster's partitions (each
// budget on its key's partition). The Manager calls nothing else.
type Backend interface {
	Add(ctx context.Context, key string, n int64) (int64, error)
	Read(ctx context.Context, key string) (Totals, error)
	Take(ctx context.Context, key string, n int64) (bool, error)
	Lease(ctx context.Context, key, holder string, request, w, floor int64, ttl time.Duration) (id, size int64, err error)
	GiveBack(ctx context.Context, ids, units []int64) error
	ReturnLost(ctx context.Context, holder string, requests []int64) (found []int64, units int64, err error)
	Reclaim(ctx context.Context, holder string) (leases int, units int64, err error)
	Renew(ctx context.Context, holder string, ttl time.Duration) ([]int64, error)
	Forfeit(ctx context.Context) (int64, error)
	Prune(ctx context.Context, holder string) error
	NextRange(ctx context.Context, key string, n int64) (int64, error)
}

var _ Backend = (*Store)(nil)

// notSent reports whether err says a statement never reached PostgreSQL:
// no connection could be made, or pgx failed it before writing it.
func notSent(err error) bool {
	var connect *pgconn.ConnectError
	return errors.As(err, &connect) || pgconn.SafeToRetry(err)
}
