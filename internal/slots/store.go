package slots

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/counterd/counterd/internal/store"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/counterd/counterd/internal/change"
	"github.com/jackc/pgx/v5/pgxpool"
)

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

// Options configure a Store.
type Options struct {
	// Slots is how many slot rows one key may spread over (1..32767).
	Slots int
	// Writers is how many transactions ApplyOnce splits a batch into at
	// most, run at once on as many connections (1..Lanes, default 2). A
	// batch is split only while PostgreSQL is behind (spread.go).
	Writers int
	// SplitAlways splits every batch over Writers (one transaction per
	// 2,000 keys), however PostgreSQL keeps up: for tests and benchmarks
	// of the split itself.
	SplitAlways bool
	// MaxAttempts bounds retries of a transaction that hit a deadlock or
	// serialization failure (default 8).
	MaxAttempts int
	// Retention says how long key's buckets of a windowed kind are kept
	// after they end (false: the key has no such window now; its bucket
	// is kept until it ends). Nil keeps every bucket until it ends.
	Retention func(key string, k change.Kind) (time.Duration, bool)
	// KeyTTL, when set, is the idle retention of a key (0: none); each
	// round that writes a key with one moves its expiry to now plus it
	// (COUNTERD_KEY_TTL, see retain.go).
	KeyTTL func(key string) time.Duration
	// StatementRows bounds the changes one statement of a round writes
	// (default DefaultStatementRows; bound.go).
	StatementRows int
	// Home is the slot row this store's rounds try first for every key
	// and create when none is free and it has none (kind_total.go),
	// plus one: 0 picks
	// one at random, so daemons sharing the database mostly start from
	// different rows. For tests.
	Home int
	// Kinds are the writers of the kinds the store writes, one per kind
	// family, as the daemon's and the rollup's list has them
	// (internal/catalog); a round with a change of a kind none of them
	// writes fails. A kind may have one writer only.
	Kinds []Writer
}

// Store reads and writes counters in PostgreSQL.
type Store struct {
	pool        *pgxpool.Pool
	slots       int
	home        int16 // the slot rounds try first (Options.Home)
	writers     int
	rows        int // Options.StatementRows
	maxAttempts int
	retention   func(key string, k change.Kind) (time.Duration, bool)
	keyTTL      keyTTLFunc
	// expiring is set once any key had an expiry (anyExpiry).
	expiring atomic.Bool
	spread   spread
	// failAfterLanes is a test's fault (fault.go); nil in production.
	failAfterLanes func() error
	// ws is the writers of Options.Kinds and the store's own.
	ws *writerSet
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
	if opts.Writers < 1 || opts.Writers > store.Lanes {
		return nil, fmt.Errorf("writers must be 1..%d, got %d", store.Lanes, opts.Writers)
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.StatementRows <= 0 {
		opts.StatementRows = DefaultStatementRows
	}
	if len(opts.Kinds) == 0 {
		return nil, errors.New("no kinds to write: Options.Kinds lists none")
	}
	ws, err := newWriterSet(append(slices.Clip(opts.Kinds), keyTTLWriter()))
	if err != nil {
		return nil, err
	}
	return &Store{pool: pool, slots: opts.Slots, home: homeSlot(opts.Home, opts.Slots), writers: opts.Writers, rows: opts.StatementRows, maxAttempts: opts.MaxAttempts,
		retention: opts.Retention, keyTTL: opts.KeyTTL, spread: spread{always: opts.SplitAlways}, ws: ws}, nil
}

// homeSlot is Options.Home's slot among slots: home-1, or at random for 0.
func homeSlot(home, slots int) int16 {
	if home > 0 {
		return int16((home - 1) % slots)
	}
	return int16(rand.IntN(slots))
}

// fallbackSlot is a random slot other than the home (the home itself
// with one slot), for a key none of whose rows is free while its home row
// exists.
func (s *Store) fallbackSlot() int16 {
	if s.slots == 1 {
		return 0
	}
	r := int16(rand.IntN(s.slots - 1))
	if r >= s.home {
		r++
	}
	return r
}

// Home is the slot row this store's rounds try first for each key.
func (s *Store) Home() int { return int(s.home) }

// Slots returns how many slot rows one key may spread over.
func (s *Store) Slots() int { return s.slots }

// Writers returns how many transactions ApplyOnce runs at once at most.
func (s *Store) Writers() int { return s.writers }

// retry runs fn, again after a deadlock or serialization failure (with
// a random backoff that doubles up to 64 ms), until it has tried
// s.maxAttempts times in all; *attempts counts the tries. It returns fn's
// last error, or ctx's if ctx ends during a backoff. Every retried
// transaction of the store goes through it.
func (s *Store) retry(ctx context.Context, attempts *int, fn func() error) error {
	for {
		*attempts++
		err := fn()
		if err == nil || !retryable(err) || *attempts >= s.maxAttempts {
			return err
		}
		backoff := time.Duration(rand.Int64N(int64(time.Millisecond) << min(*attempts, 6)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// fenceCode is the SQLSTATE counterd_fence raises.
const fenceCode = "CDF01"

// fenced wraps a counterd_fence failure in ErrFenced.
func fenced(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == fenceCode {
		return fmt.Errorf("%w: %w", store.ErrFenced, err)
	}
	return err
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40P01" || pgErr.Code == "40001"
	}
	return false
}
