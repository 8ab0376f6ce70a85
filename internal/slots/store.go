package slots

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrOverflow reports that a write would take a stored count past int64.
var ErrOverflow = errors.New("count would overflow int64")

// DefaultSlots is the default number of slot rows a key may spread over.
const DefaultSlots = 16

// Delta is one key's net change in a batch.
type Delta struct {
	Key string
	N   int64
	// Var is the variance of the sampled increments in N (0 when exact).
	Var float64
}

// Options configure a Store.
type Options struct {
	// Slots is how many slot rows one key may spread over (1..32767).
	Slots int
	// MaxAttempts bounds retries of a transaction that hit a deadlock or
	// serialization failure (default 8).
	MaxAttempts int
}

// Store reads and writes counters in PostgreSQL.
type Store struct {
	pool        *pgxpool.Pool
	slots       int
	maxAttempts int
}

// New returns a Store over pool, which must have the schema migrated.
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	if opts.Slots == 0 {
		opts.Slots = DefaultSlots
	}
	if opts.Slots < 1 || opts.Slots > 32767 {
		return nil, fmt.Errorf("slots must be 1..32767, got %d", opts.Slots)
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	return &Store{pool: pool, slots: opts.Slots, maxAttempts: opts.MaxAttempts}, nil
}

// Slots returns how many slot rows one key may spread over.
func (s *Store) Slots() int { return s.slots }

// ApplyResult says how a batch was written.
type ApplyResult struct {
	// Updated counts keys added to an existing slot row: a free one, or,
	// when none was free, the random slot's.
	Updated int
	// Inserted counts keys that created a slot row.
	Inserted int
	// Duplicate says the batch's identity was already recorded, so
	// nothing was written.
	Duplicate bool
	// Attempts is how many transactions it took (1 unless retried).
	Attempts int
}

// BatchID identifies one flush round of one daemon instance. Sequence
// numbers of an instance must increase from round to round.
type BatchID struct {
	Instance string
	Seq      uint64
}

// Apply adds every delta in one statement (its own transaction), without
// recording an identity: a retry after a lost acknowledgement counts
// twice. Daemons use ApplyOnce.
func (s *Store) Apply(ctx context.Context, batch []Delta) (ApplyResult, error) {
	return s.apply(ctx, nil, batch)
}

// ApplyOnce adds every delta and records id in the same transaction; a
// batch whose id (or a later one of the same instance) is already recorded
// writes nothing and reports Duplicate.
func (s *Store) ApplyOnce(ctx context.Context, id BatchID, batch []Delta) (ApplyResult, error) {
	return s.apply(ctx, &id, batch)
}

// apply sorts batch by key in place, because every writer must lock rows
// in the same order, and writes it. Keys must be unique. Deadlocks and
// serialization failures are retried; an int64 overflow returns an error
// wrapping ErrOverflow and writes nothing.
func (s *Store) apply(ctx context.Context, id *BatchID, batch []Delta) (ApplyResult, error) {
	var res ApplyResult
	if len(batch) == 0 && id == nil {
		return res, nil
	}
	slices.SortFunc(batch, func(a, b Delta) int { return strings.Compare(a.Key, b.Key) })
	keys := make([]string, len(batch))
	deltas := make([]int64, len(batch))
	vars := make([]float64, len(batch))
	fallback := make([]int16, len(batch))
	for i, d := range batch {
		keys[i], deltas[i], vars[i] = d.Key, d.N, d.Var
		fallback[i] = int16(rand.IntN(s.slots))
	}
	var instance *string
	var seq int64
	if id != nil {
		instance, seq = &id.Instance, int64(id.Seq)
	}
	err := s.retry(ctx, &res.Attempts, func() error {
		return s.pool.QueryRow(ctx, applyBatch, instance, seq, keys, deltas, vars, fallback).
			Scan(&res.Updated, &res.Inserted, &res.Duplicate)
	})
	return res, err
}

// applyBatch calls the slotted write behind the identity check
// (sql/004_set_based.up.sql).
const applyBatch = `SELECT updated, inserted, duplicate
FROM counterd_apply($1::text, $2::bigint, $3::text[], $4::bigint[], $5::float8[], $6::smallint[])`

// LastSeq returns the sequence number of the last batch instance
// committed, or 0.
func (s *Store) LastSeq(ctx context.Context, instance string) (uint64, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT last_seq FROM counterd_instances WHERE instance = $1), 0)`, instance).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("read last committed batch: %w", err)
	}
	return uint64(seq), nil
}

// PruneInstances deletes the batch identity of instances that have not
// committed since before cutoff, and returns how many it deleted.
func (s *Store) PruneInstances(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM counterd_instances WHERE updated_at < $1`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("prune instances: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Totals returns base plus slots for each key, in one statement; a key
// never counted is 0.
func (s *Store) Totals(ctx context.Context, keys []string) ([]int64, error) {
	out := make([]int64, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, totals, keys)
	if err != nil {
		return nil, fmt.Errorf("read totals: %w", classify(err))
	}
	var (
		ord int64
		n   int64
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &n}, func() error {
		out[ord-1] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read totals: %w", classify(err))
	}
	return out, nil
}

// Estimate is a key's total with the variance of its sampled part.
type Estimate struct {
	Total int64
	Var   float64
}

// Estimates returns, per key, what counter_estimates says, in one
// statement; a key never counted is exactly 0.
func (s *Store) Estimates(ctx context.Context, keys []string) ([]Estimate, error) {
	out := make([]Estimate, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, estimates, keys)
	if err != nil {
		return nil, fmt.Errorf("read estimates: %w", classify(err))
	}
	var (
		ord int64
		e   Estimate
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &e.Total, &e.Var}, func() error {
		out[ord-1] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read estimates: %w", classify(err))
	}
	return out, nil
}

const estimates = `
SELECT k.ord, e.total, e.var
FROM unnest($1::text[]) WITH ORDINALITY AS k(key, ord)
CROSS JOIN LATERAL (
    SELECT coalesce(sum(n), 0)::bigint AS total, coalesce(sum(v), 0) AS var FROM (
        SELECT c.total AS n, c.variance AS v FROM counters c WHERE c.key = k.key
        UNION ALL
        SELECT cs.count, cs.variance FROM counter_slots cs WHERE cs.key = k.key
    ) AS parts
) AS e`

// totals is counter_totals for a list of keys, written per key so each is
// an index lookup rather than an aggregate over the whole view.
const totals = `
SELECT k.ord, (
    SELECT coalesce(sum(n), 0)::bigint FROM (
        SELECT c.total AS n FROM counters c WHERE c.key = k.key
        UNION ALL
        SELECT cs.count FROM counter_slots cs WHERE cs.key = k.key
    ) AS parts
)
FROM unnest($1::text[]) WITH ORDINALITY AS k(key, ord)`

// retry runs fn, again after a deadlock or serialization
// failure, at most s.maxAttempts times.
func (s *Store) retry(ctx context.Context, attempts *int, fn func() error) error {
	for {
		*attempts++
		err := fn()
		if err == nil {
			return nil
		}
		err = classify(err)
		if !retryable(err) || *attempts >= s.maxAttempts {
			return fmt.Errorf("write batch (attempt %d): %w", *attempts, err)
		}
		backoff := time.Duration(rand.Int64N(int64(time.Millisecond) << min(*attempts, 6)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("write batch: %w", ctx.Err())
		case <-time.After(backoff):
		}
	}
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40P01" || pgErr.Code == "40001"
	}
	return false
}

// classify wraps a numeric overflow from PostgreSQL in ErrOverflow.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22003" {
		return fmt.Errorf("%w: %s", ErrOverflow, pgErr.Message)
	}
	return err
}
