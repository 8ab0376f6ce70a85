package budget

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store runs the budget statements. Each is one statement (its own
// transaction) and keeps granted + leased + forfeited <= total; the
// CHECK constraints of budgets make PostgreSQL refuse any that would not.
type Store struct {
	pool *pgxpool.Pool
	// Generation is the daemon run that holds the leases (its journal
	// generation). Leases are taken and renewed only while that run owns
	// the holder's instance (counterd_owner_beat), so a daemon whose
	// instance was taken over by another can never extend a lease.
	Generation string
}

// NewStore returns a Store over pool, whose schema is migrated.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// ErrBelowGranted is BUDGET key -n refused: the total would go below what
// is granted, leased or forfeited.
var ErrBelowGranted = errors.New("the total would go below what is granted, leased or forfeited")

// ErrTotalOverflow is BUDGET key n refused: the budget's total would pass
// the largest integer (its column is a bigint, SQLSTATE 22003).
var ErrTotalOverflow = errors.New("the total would pass 9223372036854775807")

// Add adds n (possibly negative) to budget key, creating it, and returns
// the new unleased remainder.
func (s *Store) Add(ctx context.Context, key string, n int64) (int64, error) {
	var r int64
	err := s.pool.QueryRow(ctx, `SELECT budget_add($1, $2)`, key, n).Scan(&r)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23514":
			return 0, ErrBelowGranted
		case "22003":
			return 0, ErrTotalOverflow
		}
	}
	if err != nil {
		return 0, fmt.Errorf("add to budget: %w", err)
	}
	return r, nil
}

// Totals is one budget as budget_totals shows it.
type Totals struct{ Remaining, Granted, Leased, Forfeited, Total int64 }

// Read returns budget key's totals; a budget never created is all zero.
func (s *Store) Read(ctx context.Context, key string) (Totals, error) {
	var t Totals
	err := s.pool.QueryRow(ctx, `SELECT remaining, granted, leased, forfeited, total FROM budget_totals WHERE key = $1`, key).
		Scan(&t.Remaining, &t.Granted, &t.Leased, &t.Forfeited, &t.Total)
	if errors.Is(err, pgx.ErrNoRows) {
		return Totals{}, nil
	}
	if err != nil {
		return t, fmt.Errorf("read budget: %w", err)
	}
	return t, nil
}

// takeSQL is the seed's lock-free conditional update: it grants n or
// nothing, with no read before the write and no lock held across a round
// trip.
const takeSQL = `UPDATE budgets SET granted = granted + $2
WHERE key = $1 AND total - granted - leased - forfeited >= $2`

// Take grants n units of key directly in PostgreSQL, or none.
func (s *Store) Take(ctx context.Context, key string, n int64) (bool, error) {
	var ok bool
	err := retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, takeSQL, key, n)
		ok = tag.RowsAffected() == 1
		return err
	}, "take from budget")
	return ok, err
}

// leaseSQL leases min($2, remainder / shareDivisor) units of budget $1 to
// holder $5 for $6 ms, if that is at least $4, in one statement: the
// UPDATE moves the units from remaining to leased (every SET expression
// reads the old row, so last_lease is the size chosen), and the INSERT
// records the lease. Concurrent leases of one budget serialize on its row
// and each re-checks the remainder after the one before it commits.
const leaseSQL = `
WITH b AS (
    UPDATE budgets
    SET leased = leased + least($2::bigint, (total - granted - leased - forfeited) / $3::bigint),
        last_lease = least($2::bigint, (total - granted - leased - forfeited) / $3::bigint)
    WHERE key = $1 AND least($2::bigint, (total - granted - leased - forfeited) / $3::bigint) >= $4::bigint
        AND counterd_owner_beat($5, $7)
    RETURNING key, last_lease
)
INSERT INTO budget_leases (key, holder, size, leased, expires_at, request)
SELECT key, $5, last_lease, last_lease, now() + $6::bigint * interval '1 millisecond', $8 FROM b
RETURNING id, size`

// Lease leases up to w units of key (at least floor) to holder for ttl
// and returns the lease id and size, or size 0 when the remainder is too
// small or another run owns holder's instance. request is a number the
// holder picked for this call: if the reply is lost, ReturnLost finds the
// lease by it.
func (s *Store) Lease(ctx context.Context, key, holder string, request, w, floor int64, ttl time.Duration) (id, size int64, err error) {
	err = retry(ctx, func() error {
		err := s.pool.QueryRow(ctx, leaseSQL, key, w, int64(shareDivisor), floor, holder, ttl.Milliseconds(), s.Generation, request).Scan(&id, &size)
		if errors.Is(err, pgx.ErrNoRows) {
			id, size = 0, 0
			return nil
		}
		return err
	}, "lease from budget")
	return id, size, err
}

// giveBackSQL returns units of leases that their holder will never
// grant, until lease $1[i] has returned $2[i] in all (so a retry after a
// lost reply returns nothing twice): size shrinks, and the budget's units
// go back to remaining from leased, or, for a forfeited lease, from
// forfeited. Lease rows are locked before budget rows, as by every
// statement here. (A multi-row UPDATE FROM returns the old row's values
// through the join only via the difference it computes, hence x.n - o.returned.)
const giveBackSQL = `
WITH o AS (
    SELECT l.id, x.n - l.returned AS n
    FROM budget_leases l JOIN unnest($1::bigint[], $2::bigint[]) AS x(id, n) ON l.id = x.id
    WHERE x.n > l.returned
    FOR UPDATE OF l
), r AS (
    UPDATE budget_leases l SET size = l.size - o.n, returned = l.returned + o.n
    FROM o WHERE l.id = o.id
    RETURNING l.key, l.forfeited, o.n
), s AS (
    SELECT key, coalesce(sum(n) FILTER (WHERE NOT forfeited), 0) AS l, coalesce(sum(n) FILTER (WHERE forfeited), 0) AS f
    FROM r GROUP BY key
)
UPDATE budgets b SET leased = b.leased - s.l, forfeited = b.forfeited - s.f FROM s WHERE b.key = s.key`

// GiveBack makes lease ids[i] have returned units[i] in all.
func (s *Store) GiveBack(ctx context.Context, ids, units []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return retry(ctx, func() error {
		_, err := s.pool.Exec(ctx, giveBackSQL, ids, units)
		return err
	}, "return leased units")
}

// lostSQL finds the leases holder $1 took by one of the requests $2 whose
// reply it never got: their ids, requests and what each leased.
const lostSQL = `SELECT id, request, leased, leased - returned FROM budget_leases
WHERE holder = $1 AND request = ANY($2::bigint[])`

// ReturnLost returns whole the leases holder took by requests whose
// replies were lost, and reports which of requests have a lease (returned
// now or before) and how many units went back now. The holder never knew
// these leases' ids, so it granted nothing from them: giving back all
// they leased is exact, and GiveBack names the total returned, so a
// retry returns nothing twice. A request not found may have taken
// nothing, or its statement may still be running.
func (s *Store) ReturnLost(ctx context.Context, holder string, requests []int64) (found []int64, units int64, err error) {
	rows, err := s.pool.Query(ctx, lostSQL, holder, requests)
	if err != nil {
		return nil, 0, fmt.Errorf("find leases whose reply was lost: %w", err)
	}
	var ids, leased []int64
	var id, request, size, left int64
	_, err = pgx.ForEachRow(rows, []any{&id, &request, &size, &left}, func() error {
		ids, leased, found = append(ids, id), append(leased, size), append(found, request)
		units += left
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("find leases whose reply was lost: %w", err)
	}
	if err := s.GiveBack(ctx, ids, leased); err != nil {
		return nil, 0, err
	}
	return found, units, nil
}

// reclaimSQL deletes every lease of holder $1 and returns its whole size.
// Only the holder runs it, and only when every grant it journaled is
// recorded (its journal is flushed), so size is exactly what it never
// granted.
const reclaimSQL = `
WITH r AS (
    DELETE FROM budget_leases WHERE holder = $1 RETURNING key, forfeited, size
), s AS (
    SELECT key, coalesce(sum(size) FILTER (WHERE NOT forfeited), 0) AS l, coalesce(sum(size) FILTER (WHERE forfeited), 0) AS f
    FROM r GROUP BY key
), u AS (
    UPDATE budgets b SET leased = b.leased - s.l, forfeited = b.forfeited - s.f FROM s WHERE b.key = s.key
)
SELECT count(*)::int, coalesce(sum(size), 0)::bigint FROM r`

// Reclaim returns every lease of holder, which must have its journal
// flushed, and reports how many leases and units it returned.
func (s *Store) Reclaim(ctx context.Context, holder string) (leases int, units int64, err error) {
	err = retry(ctx, func() error {
		return s.pool.QueryRow(ctx, reclaimSQL, holder).Scan(&leases, &units)
	}, "reclaim leases")
	return leases, units, err
}

// Renew extends every live lease of holder by ttl and returns their ids;
// none while another run owns holder's instance.
func (s *Store) Renew(ctx context.Context, holder string, ttl time.Duration) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `WITH o AS (SELECT counterd_owner_beat($1, $3) AS owned)
UPDATE budget_leases SET expires_at = now() + $2::bigint * interval '1 millisecond'
FROM o WHERE o.owned AND holder = $1 AND NOT forfeited RETURNING id`, holder, ttl.Milliseconds(), s.Generation)
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return ids, nil
}

// forfeitSQL forfeits every live lease past its expiry: its size moves
// from leased to forfeited. Whoever runs it, the holder's later grants
// and returns stay within the size forfeited.
const forfeitSQL = `
WITH f AS (
    UPDATE budget_leases SET forfeited = true
    WHERE NOT forfeited AND expires_at < now()
    RETURNING key, size
), s AS (SELECT key, sum(size) AS n FROM f GROUP BY key)
UPDATE budgets b SET leased = b.leased - s.n, forfeited = b.forfeited + s.n FROM s WHERE b.key = s.key`

// Forfeit forfeits expired leases of every holder and returns how many
// budgets it touched.
func (s *Store) Forfeit(ctx context.Context) (int64, error) {
	var n int64
	err := retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, forfeitSQL)
		n = tag.RowsAffected()
		return err
	}, "forfeit expired leases")
	return n, err
}

// Prune deletes holder's leases whose size is 0: nothing is left to
// grant from them or to record against them.
func (s *Store) Prune(ctx context.Context, holder string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM budget_leases WHERE holder = $1 AND size = 0`, holder); err != nil {
		return fmt.Errorf("prune used-up leases: %w", err)
	}
	return nil
}

// nextSQL leases the range [lo, lo+$2-1] of sequence $1 (created at 1)
// and returns lo.
const nextSQL = `
INSERT INTO budget_sequences AS s (key, next) VALUES ($1, 1 + $2::bigint)
ON CONFLICT (key) DO UPDATE SET next = s.next + $2::bigint
RETURNING next - $2::bigint`

// NextRange leases n numbers of sequence key and returns the first.
func (s *Store) NextRange(ctx context.Context, key string, n int64) (int64, error) {
	var lo int64
	if err := s.pool.QueryRow(ctx, nextSQL, key, n).Scan(&lo); err != nil {
		return 0, fmt.Errorf("lease numbers: %w", err)
	}
	return lo, nil
}

// transient reports whether err is a statement PostgreSQL rolled back for
// a reason that passes: a deadlock (statements over several budgets lock
// their rows in no fixed order) or a lock wait past lock_timeout (a round
// recording grants holds the budget's row until it commits, which a busy
// disk can make slow). Such a statement took effect nowhere, so running
// it again is safe.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "55P03")
}

// retry runs fn again after a transient error, up to 10 times and while
// ctx lasts; every statement here is atomic.
func retry(ctx context.Context, fn func() error, what string) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !transient(err) || attempt == 10 {
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(time.Duration(rand.Int64N(int64(time.Millisecond) << attempt))):
		}
	}
}
