package slots

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/counterd/counterd/internal/targets"
)

// DefaultFoldChunk is how many slot rows one fold transaction moves.
const DefaultFoldChunk = 5000

// FoldOptions tune one fold pass.
type FoldOptions struct {
	// Chunk is how many slot rows one transaction moves (default
	// DefaultFoldChunk).
	Chunk int
	// MaxDuration, when positive, ends the pass successfully once it has
	// run this long: it starts no new chunk and leaves the rows it did
	// not reach for the next pass.
	MaxDuration time.Duration
	// UpdatedAt stamps counters.updated_at; the zero time means the
	// database's now().
	UpdatedAt time.Time
	// Clock measures MaxDuration (default time.Now).
	Clock func() time.Time
	// Targets, when not empty, are app columns each chunk also adds its
	// folded amounts to, in the same transaction (see fold_targets.go).
	// They must be resolved (targets.Set.Resolve).
	Targets *targets.Set
	// OnMissing, if set, is called after a chunk commits with the keys
	// of a target that named no row (or an id that does not parse):
	// folded into counters, not into the column.
	OnMissing func(t *targets.Target, keys []string)
}

// defaults returns the chunk size and clock o asks for, or their defaults.
func (o FoldOptions) defaults() (chunk int, clock func() time.Time) {
	chunk, clock = o.Chunk, o.Clock
	if chunk <= 0 {
		chunk = DefaultFoldChunk
	}
	if clock == nil {
		clock = time.Now
	}
	return chunk, clock
}

// FoldResult says what a fold pass moved and what it left.
type FoldResult struct {
	// Rows is how many slot rows were folded and deleted.
	Rows int64
	// Keys is how many base rows were created or updated (a key folded
	// by two chunks counts twice).
	Keys int64
	// Chunks is how many transactions committed.
	Chunks int
	// Limited says MaxDuration ended the pass before it reached the last
	// slot row that existed when it started.
	Limited bool
	// Skipped is how many slot rows could not be moved because of their
	// data; the error Fold returns describes each (see RowError).
	Skipped int
	// Left is how many slot rows remained when the pass ended: rows
	// written, or held by writers, while it ran, skipped rows, and rows
	// it did not reach when Limited.
	Left int64
	// Missing is how many times a key matching a target was folded into
	// counters but not into the target's column, because its row does
	// not exist or its id does not parse (a key folded by two chunks
	// counts twice).
	Missing int64
}

// RowError is a slot row a fold could not move because of its data, for
// example a sum past the range of counters.total. The pass skips the row,
// folds every other key, and leaves the row for the next pass.
type RowError struct {
	Key  string
	Slot int16
	Err  error
}

func (e *RowError) Error() string {
	return fmt.Sprintf("fold slot row key %q slot %d: %v", e.Key, e.Slot, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// position is a slot row's primary key, the order a pass sweeps in.
type position struct {
	key  string
	slot int16
}

// beforeAll sorts before every slot row: keys are never empty and slots
// never negative.
var beforeAll = position{"", -1}

func (p position) String() string {
	if p == beforeAll {
		return "the start"
	}
	return fmt.Sprintf("key %q slot %d", p.key, p.slot)
}

// Fold moves slot counts into the base table, chunk rows per transaction.
// Each chunk deletes its slot rows and adds their sums to the base rows in
// one transaction, so an increment is moved exactly once. Rows a writer
// holds are skipped and left for the next pass, so a fold never waits on
// writers.
//
// A pass sweeps the slot rows once, in primary key order, up to the last
// one that existed when it started: rows writers add behind it, or past
// that mark, wait for the next pass, so a pass ends however fast writers
// write. MaxDuration bounds it in time as well.
//
// A chunk that fails because of its data (SQLSTATE class 22 or 23, such
// as an overflow) is split until the row at fault is found; that row is
// skipped and the pass goes on, so one key never holds back the others.
// Fold then returns the complete result with every RowError joined. Any
// other failure ends the pass with an error naming the chunk's key range.
func (s *Store) Fold(ctx context.Context, opts FoldOptions) (FoldResult, error) {
	var res FoldResult
	var end position
	err := s.pool.QueryRow(ctx, lastSlotRow).Scan(&end.key, &end.slot)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return res, fmt.Errorf("fold: find the last slot row: %w", err)
	}
	var skipped []error
	if err == nil {
		if skipped, err = s.foldPass(ctx, end, &opts, &res); err != nil {
			return res, err
		}
	}
	if err := s.foldKinds(ctx); err != nil {
		return res, err
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM counter_slots`).Scan(&res.Left); err != nil {
		return res, fmt.Errorf("fold: count slot rows left: %w", err)
	}
	return res, errors.Join(skipped...)
}

// foldPass sweeps the slot rows through end, chunk by chunk, adding what
// it moved to res, and returns the RowError of each row it skipped.
func (s *Store) foldPass(ctx context.Context, end position, opts *FoldOptions, res *FoldResult) ([]error, error) {
	chunk, clock := opts.defaults()
	var stamp *time.Time
	if !opts.UpdatedAt.IsZero() {
		stamp = &opts.UpdatedAt
	}
	start := clock()
	var skipped []error
	cur, n := beforeAll, chunk
	for first := true; ; first = false {
		if !first && opts.MaxDuration > 0 && clock().Sub(start) >= opts.MaxDuration {
			res.Limited = true
			return skipped, nil
		}
		c, err := s.foldChunk(ctx, cur, end, n, stamp, opts)
		switch {
		case err == nil:
			res.add(c, opts)
			if c.swept < int64(n) {
				return skipped, nil // swept past end, or every row left is held
			}
			cur = c.last
			continue
		case !isDataError(err):
			return skipped, fmt.Errorf("fold chunk %d (after %v, through %v): %w", res.Chunks+1, cur, end, err)
		case n > 1:
			n /= 2
			continue
		}
		row, err := s.foldAlone(ctx, cur, end, stamp, opts, res, &skipped)
		if err != nil || row == nil {
			return skipped, err
		}
		cur, n = *row, chunk
	}
}

// foldAlone folds, alone, the first unheld row after cur through end,
// after a chunk of one row failed because of its data: exactly that row
// again, so a row that changed hands in between is not blamed. It returns
// the row (nil when none is left), and adds its RowError to skipped if its
// data fails it again.
func (s *Store) foldAlone(ctx context.Context, cur, end position, stamp *time.Time, opts *FoldOptions, res *FoldResult, skipped *[]error) (*position, error) {
	var row position
	err := s.pool.QueryRow(ctx, nextSlotRow, cur.key, cur.slot, end.key, end.slot).Scan(&row.key, &row.slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fold: find the slot row after %v: %w", cur, err)
	}
	c, err := s.foldChunk(ctx, cur, row, 1, stamp, opts)
	switch {
	case err == nil:
		res.add(c, opts)
	case isDataError(err):
		res.Skipped++
		*skipped = append(*skipped, &RowError{Key: row.key, Slot: row.slot, Err: err})
	default:
		return nil, fmt.Errorf("fold chunk %d (%v): %w", res.Chunks+1, row, err)
	}
	return &row, nil
}

// chunkResult is what one committed chunk moved.
type chunkResult struct {
	rows, keys int64
	// swept is how many slot rows the chunk went over: those it picked,
	// or with targets the window it read first (rows of it held by
	// others are left, as SKIP LOCKED leaves them); fewer than asked
	// means it swept past the pass's end.
	swept   int64
	last    position // the last row picked (with targets: of the window), if swept > 0
	missing []missing
}

func (r *FoldResult) add(c chunkResult, opts *FoldOptions) {
	r.Chunks++
	r.Rows += c.rows
	r.Keys += c.keys
	for _, m := range c.missing {
		r.Missing += int64(len(m.keys))
		if opts.OnMissing != nil {
			opts.OnMissing(m.target, m.keys)
		}
	}
}

// foldChunk moves up to n unheld slot rows after cur and through end in
// one transaction, retrying a deadlock or serialization failure.
func (s *Store) foldChunk(ctx context.Context, cur, end position, n int, stamp *time.Time, opts *FoldOptions) (chunkResult, error) {
	var (
		c        chunkResult
		lastKey  *string
		lastSlot *int16
	)
	var attempts int
	err := s.retry(ctx, &attempts, func() (err error) {
		if opts.Targets.Len() == 0 {
			err := s.pool.QueryRow(ctx, foldChunk, cur.key, cur.slot, end.key, end.slot, n, stamp).
				Scan(&c.rows, &c.keys, &lastKey, &lastSlot)
			c.swept = c.rows
			return err
		}
		c, lastKey, lastSlot, err = s.foldChunkTargets(ctx, cur, end, n, stamp, opts.Targets)
		return err
	})
	if err != nil {
		return c, fmt.Errorf("attempt %d: %w", attempts, overflow(err))
	}
	if lastKey != nil && lastSlot != nil {
		c.last = position{*lastKey, *lastSlot}
	}
	return c, nil
}

// overflow wraps a numeric overflow in ErrOverflow, keeping the server's
// error (classify keeps only its message).
func overflow(err error) error {
	var pgErr *pgconn.PgError
	var colErr *TargetError // a column's own type overflowed, not a total
	if errors.As(err, &pgErr) && pgErr.Code == "22003" && !errors.As(err, &colErr) {
		return fmt.Errorf("%w: %w", store.ErrOverflow, err)
	}
	return err
}

// isDataError reports whether err comes from the rows a statement read
// (SQLSTATE class 22, data exception, or 23, integrity constraint
// violation), so running it over other rows would succeed.
func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23"))
}

// lastSlotRow is where a pass stops: the last slot row when it starts.
const lastSlotRow = `SELECT key, slot FROM counter_slots ORDER BY key DESC, slot DESC LIMIT 1`

// nextSlotRow is the first unheld slot row after ($1, $2) through ($3, $4).
const nextSlotRow = `
SELECT key, slot FROM counter_slots
WHERE (key, slot) > ($1::text, $2::smallint) AND (key, slot) <= ($3::text, $4::smallint)
ORDER BY key, slot
LIMIT 1
FOR UPDATE SKIP LOCKED`

// foldChunk moves up to $5 unheld slot rows after ($1, $2) through ($3,
// $4) into counters, and returns the last one it picked. The sums stay
// numeric until they are stored, so they never wrap whatever type
// counters.total has.
var foldChunk = foldChunkCTE("") + `
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM folded),
       (SELECT key FROM last), (SELECT slot FROM last)`

// foldChunkCTE picks, deletes and folds one chunk's slot rows, those
// that also meet and (an SQL condition starting with AND, or empty); the
// statements built on it say what they return.
func foldChunkCTE(and string) string {
	return `
WITH picked AS MATERIALIZED (
    SELECT key, slot FROM counter_slots
    WHERE (key, slot) > ($1::text, $2::smallint) AND (key, slot) <= ($3::text, $4::smallint) ` + and + `
    ORDER BY key, slot
    LIMIT $5
    FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM counter_slots cs
    USING picked p
    WHERE cs.key = p.key AND cs.slot = p.slot
    RETURNING cs.key, cs.count, cs.variance
), sums AS (
    SELECT key, sum(count) AS n, sum(variance) AS v FROM moved GROUP BY key
), folded AS (
    INSERT INTO counters AS c (key, total, variance, updated_at)
    SELECT key, n, v, coalesce($6::timestamptz, now()) FROM sums ORDER BY key
    ON CONFLICT (key) DO UPDATE
    SET total = c.total + excluded.total, variance = c.variance + excluded.variance,
        updated_at = excluded.updated_at
    RETURNING 1
), last AS (
    SELECT key, slot FROM picked ORDER BY key DESC, slot DESC LIMIT 1
)`
}
