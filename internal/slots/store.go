package slots

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrOverflow reports that a write would take a stored count past int64.
var ErrOverflow = errors.New("count would overflow int64")

// DefaultSlots is the default number of slot rows a key may spread over.
const DefaultSlots = 16

// DefaultWriters is the default number of transactions a batch is split
// into: two lets PostgreSQL use a second core without taking many
// connections from a shared database.
const DefaultWriters = 2

// minKeysPerWriter is the smallest share of a batch worth its own
// transaction: below it, a commit and a round trip cost more than the
// second core saves.
const minKeysPerWriter = 2000

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
	// Writers is how many transactions ApplyOnce splits a batch into,
	// run at once on as many connections (1..Lanes, default 2).
	Writers int
	// MaxAttempts bounds retries of a transaction that hit a deadlock or
	// serialization failure (default 8).
	MaxAttempts int
}

// Store reads and writes counters in PostgreSQL.
type Store struct {
	pool        *pgxpool.Pool
	slots       int
	writers     int
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
	if opts.Writers == 0 {
		opts.Writers = DefaultWriters
	}
	if opts.Writers < 1 || opts.Writers > Lanes {
		return nil, fmt.Errorf("writers must be 1..%d, got %d", Lanes, opts.Writers)
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	return &Store{pool: pool, slots: opts.Slots, writers: opts.Writers, maxAttempts: opts.MaxAttempts}, nil
}

// Slots returns how many slot rows one key may spread over.
func (s *Store) Slots() int { return s.slots }

// Writers returns how many transactions ApplyOnce runs at once.
func (s *Store) Writers() int { return s.writers }

// ApplyResult says how a batch was written.
type ApplyResult struct {
	// Updated counts keys added to an existing slot row: a free one, or,
	// when none was free, the random slot's.
	Updated int
	// Inserted counts keys that created a slot row.
	Inserted int
	// Duplicate says the batch's identity was already recorded for every
	// lane, so nothing was written.
	Duplicate bool
	// Attempts is how many transactions it took (the number of writers
	// unless some were retried).
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
	var res ApplyResult
	if len(batch) == 0 {
		return res, nil
	}
	p := &part{deltas: make([]laneDelta, len(batch))}
	for i, d := range batch {
		p.deltas[i] = laneDelta{Delta: d}
	}
	_, err := s.write(ctx, 0, p, &res)
	return res, err
}

// ApplyOnce adds every delta exactly once per id: the keys are split by
// lane over up to s.writers transactions (one per minKeysPerWriter keys),
// run at once, and each transaction records id for its lanes. A lane
// whose id (or a later one of the same instance) is already recorded is
// skipped, so a batch retried after some or all of its transactions
// committed, or replayed after a crash, is written once. On error some
// lanes may be committed; retry with the same id.
func (s *Store) ApplyOnce(ctx context.Context, id BatchID, batch []Delta) (ApplyResult, error) {
	// A small batch is written faster by one transaction than by several
	// that each pay a commit; identities are per lane, so the grouping
	// may change from batch to batch.
	writers := min(s.writers, 1+len(batch)/minKeysPerWriter)
	parts := make([]part, writers)
	for l := range Lanes {
		p := &parts[l%writers]
		p.lanes = append(p.lanes, laneID(id.Instance, l))
	}
	for _, d := range batch {
		l := LaneOf(d.Key)
		p := &parts[l%writers]
		// Lane l is the (l/writers)-th lane of its part; SQL arrays count
		// from 1.
		p.deltas = append(p.deltas, laneDelta{Delta: d, lane: int16(l/writers + 1)})
	}
	var (
		wg      sync.WaitGroup
		results = make([]ApplyResult, writers)
		errs    = make([]error, writers)
		doneAll = make([]bool, writers)
	)
	for w := range parts {
		wg.Go(func() {
			doneAll[w], errs[w] = s.write(ctx, int64(id.Seq), &parts[w], &results[w])
		})
	}
	wg.Wait()
	res := ApplyResult{Duplicate: true}
	for w, r := range results {
		res.Updated += r.Updated
		res.Inserted += r.Inserted
		res.Attempts += r.Attempts
		res.Duplicate = res.Duplicate && doneAll[w]
	}
	return res, errors.Join(errs...)
}

// part is what one transaction writes.
type part struct {
	lanes  []string // lane identities it records; nil for none
	deltas []laneDelta
}

// laneDelta is a delta with its lane's 1-based index into part.lanes.
type laneDelta struct {
	Delta
	lane int16
}

// write sorts the part by key, because every writer must lock rows in the
// same order, and writes it in one transaction. Keys must be unique.
// Deadlocks and serialization failures are retried; an int64 overflow
// returns an error wrapping ErrOverflow and writes nothing. It reports
// whether every lane had already recorded seq.
func (s *Store) write(ctx context.Context, seq int64, p *part, res *ApplyResult) (bool, error) {
	slices.SortFunc(p.deltas, func(a, b laneDelta) int { return strings.Compare(a.Key, b.Key) })
	n := len(p.deltas)
	keys, deltas, vars := make([]string, n), make([]int64, n), make([]float64, n)
	fallback, lanes := make([]int16, n), make([]int16, n)
	for i, d := range p.deltas {
		keys[i], deltas[i], vars[i], lanes[i] = d.Key, d.N, d.Var, d.lane
		fallback[i] = int16(rand.IntN(s.slots))
	}
	var doneLanes int
	err := s.retry(ctx, &res.Attempts, func() error {
		return s.pool.QueryRow(ctx, applyBatch, p.lanes, seq, keys, deltas, vars, fallback, lanes).
			Scan(&res.Updated, &res.Inserted, &doneLanes)
	})
	return err == nil && p.lanes != nil && doneLanes == len(p.lanes), err
}

// applyBatch calls the slotted write behind the per-lane identity check
// (sql/005_lanes.up.sql).
const applyBatch = `SELECT updated, inserted, done_lanes
FROM counterd_apply($1::text[], $2::bigint, $3::text[], $4::bigint[], $5::float8[], $6::smallint[], $7::smallint[])`

// LastSeq returns the sequence number of the last batch of instance
// committed in every lane, or 0. A lane never written falls back to the
// instance's own row, which batches had before lanes existed.
func (s *Store) LastSeq(ctx context.Context, instance string) (uint64, error) {
	names := make([]string, Lanes)
	for l := range names {
		names[l] = laneID(instance, l)
	}
	var seq int64
	err := s.pool.QueryRow(ctx, `
SELECT coalesce(min(coalesce(ci.last_seq, legacy.last_seq, 0)), 0)
FROM unnest($2::text[]) AS l(name)
LEFT JOIN counterd_instances ci ON ci.instance = l.name
LEFT JOIN counterd_instances legacy ON legacy.instance = $1`, instance, names).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("read last committed batch: %w", err)
	}
	return uint64(seq), nil
}

// PruneInstances deletes the batch identity rows (one per lane) of
// instances that have not committed since before cutoff, and returns how
// many rows it deleted.
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
