package pending

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"golang.org/x/sync/semaphore"

	"github.com/counterd/counterd/internal/slots"
)

// ErrBackoff is returned by Add when too many keys are pending: the client
// should retry later.
var ErrBackoff = errors.New("too many pending keys, back off and retry")

// ErrOverflow is returned by Add when a key's pending delta would overflow
// int64.
var ErrOverflow = errors.New("increment or decrement would overflow")

// Store is where rounds are written and totals read.
type Store interface {
	Apply(ctx context.Context, batch []slots.Delta) (slots.ApplyResult, error)
	Totals(ctx context.Context, keys []string) ([]int64, error)
}

// Options configure a Buffer.
type Options struct {
	// Interval is the longest an accepted increment waits for a round.
	Interval time.Duration
	// MaxKeys starts a round early once this many keys are pending.
	MaxKeys int
	// MaxPendingKeys refuses new keys with ErrBackoff past this many.
	MaxPendingKeys int
	// Shards is the number of lock shards (default 64).
	Shards int
	// Logger receives flush errors.
	Logger *slog.Logger
	// Metrics receives the buffer's metrics; nil means a private set.
	Metrics *metrics.Set
}

const maxWeight = 1 << 30

// Buffer holds accepted increments until they are committed.
type Buffer struct {
	store  Store
	opts   Options
	seed   maphash.Seed
	shards []shard
	// keys counts distinct keys in the current shards.
	keys atomic.Int64

	// gate is held shared by readers and exclusively while a round
	// commits and while it is cleared from memory afterwards.
	gate *semaphore.Weighted
	// inflight holds the round being written, one map per shard; it is
	// replaced only while gate is held exclusively.
	inflight []map[string]*cell

	mu      sync.Mutex
	started uint64        // rounds swapped out
	done    uint64        // rounds committed
	doneCh  chan struct{} // closed and replaced when done advances
	kick    chan struct{}

	m bufferMetrics
}

type shard struct {
	mu sync.Mutex
	// Values are pointers so that adding to an existing key is a lookup,
	// which does not allocate, rather than an assignment, which copies
	// the key.
	m map[string]*cell
	_ [40]byte // keep neighbouring shard locks off one cache line
}

type cell struct{ n int64 }

// New returns a Buffer writing to store. Call Run to start flushing.
func New(store Store, opts Options) *Buffer {
	if opts.Shards <= 0 {
		opts.Shards = 64
	}
	if opts.Interval <= 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = 10000
	}
	if opts.MaxPendingKeys <= 0 {
		opts.MaxPendingKeys = math.MaxInt
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	b := &Buffer{
		store:  store,
		opts:   opts,
		seed:   maphash.MakeSeed(),
		shards: make([]shard, opts.Shards),
		gate:   semaphore.NewWeighted(maxWeight),
		doneCh: make(chan struct{}),
		kick:   make(chan struct{}, 1),
	}
	for i := range b.shards {
		b.shards[i].m = make(map[string]*cell)
	}
	b.m = newBufferMetrics(opts.Metrics, b)
	return b
}

func (b *Buffer) shardOf(key []byte) int {
	return int(maphash.Bytes(b.seed, key) % uint64(len(b.shards)))
}

// Add folds delta into key's pending delta. It fails with ErrOverflow or
// ErrBackoff and then changes nothing.
func (b *Buffer) Add(key []byte, delta int64) error {
	s := &b.shards[b.shardOf(key)]
	s.mu.Lock()
	c := s.m[string(key)]
	if c == nil && b.keys.Load() >= int64(b.opts.MaxPendingKeys) {
		s.mu.Unlock()
		b.m.rejected.Inc()
		return ErrBackoff
	}
	isNew := c == nil
	if isNew {
		c = &cell{}
		s.m[string(key)] = c
	}
	sum, err := addChecked(c.n, delta)
	if err != nil {
		if isNew {
			delete(s.m, string(key))
		}
		s.mu.Unlock()
		b.m.rejected.Inc()
		return ErrOverflow
	}
	c.n = sum
	s.mu.Unlock()
	b.m.accepted.Inc()
	if isNew && b.keys.Add(1) == int64(b.opts.MaxKeys) {
		b.Kick()
	}
	return nil
}

// Kick asks the flusher to start a round now.
func (b *Buffer) Kick() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// PendingKeys reports how many distinct keys wait for the next round.
func (b *Buffer) PendingKeys() int { return int(b.keys.Load()) }

// Get returns each key's exact total: the store's total plus what this
// buffer holds, current and in flight.
func (b *Buffer) Get(ctx context.Context, keys []string) ([]int64, error) {
	if err := b.gate.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("wait for the round in flight: %w", err)
	}
	defer b.gate.Release(1)
	totals, err := b.store.Totals(ctx, keys)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		local, err := b.local(k)
		if err == nil {
			totals[i], err = addChecked(totals[i], local)
		}
		if err != nil {
			return nil, fmt.Errorf("total of %q: %w", k, err)
		}
	}
	return totals, nil
}

// local is key's pending delta, current plus in flight. The caller holds
// the gate.
func (b *Buffer) local(key string) (int64, error) {
	i := b.shardOf([]byte(key))
	s := &b.shards[i]
	s.mu.Lock()
	var cur, fly int64
	if c := s.m[key]; c != nil {
		cur = c.n
	}
	s.mu.Unlock()
	if b.inflight != nil {
		if c := b.inflight[i][key]; c != nil {
			fly = c.n
		}
	}
	return addChecked(cur, fly)
}

func addChecked(a, b int64) (int64, error) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, slots.ErrOverflow
	}
	return s, nil
}

// Flush returns once every increment added before the call is committed,
// or ctx ends.
func (b *Buffer) Flush(ctx context.Context) error {
	b.mu.Lock()
	target := b.started + 1
	b.mu.Unlock()
	b.Kick()
	for {
		b.mu.Lock()
		done, ch := b.done, b.doneCh
		b.mu.Unlock()
		if done >= target {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("flush: %w", ctx.Err())
		}
	}
}

// Run flushes rounds until ctx ends, then flushes what remains, retrying
// for at most drain. It returns an error only if increments could not be
// committed by then.
func (b *Buffer) Run(ctx context.Context, drain time.Duration) error {
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
			defer cancel()
			for b.PendingKeys() > 0 || b.inflight != nil {
				if err := b.round(dctx); err != nil {
					return fmt.Errorf("final flush: %d keys not committed: %w", b.PendingKeys()+len(b.batch()), err)
				}
			}
			return nil
		case <-t.C:
		case <-b.kick:
		}
		// round retries until it succeeds or ctx ends.
		_ = b.round(ctx)
	}
}

// round swaps the current shards out (unless a failed round is still in
// flight) and writes them, retrying with capped backoff until it commits
// or ctx ends.
func (b *Buffer) round(ctx context.Context) error {
	if b.inflight == nil {
		b.swap()
	}
	batch := b.batch()
	for attempt := 0; ; attempt++ {
		err := b.commit(ctx, batch)
		if err == nil {
			return nil
		}
		b.m.flushErrors.Inc()
		b.opts.Logger.Error("flush failed; will retry", "keys", len(batch), "attempt", attempt+1, "err", err)
		wait := backoff(attempt)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// swap moves every shard's map into flight and starts a round. It holds
// the gate exclusively so no reader sees a key neither in the shards nor
// in flight.
func (b *Buffer) swap() {
	if err := b.gate.Acquire(context.Background(), maxWeight); err != nil {
		panic("BUG: acquire without a deadline failed: " + err.Error())
	}
	defer b.gate.Release(maxWeight)
	b.mu.Lock()
	b.started++
	b.mu.Unlock()
	fly := make([]map[string]*cell, len(b.shards))
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		fly[i] = s.m
		s.m = make(map[string]*cell, len(fly[i]))
		b.keys.Add(-int64(len(fly[i])))
		s.mu.Unlock()
	}
	b.inflight = fly
}

func (b *Buffer) batch() []slots.Delta {
	var n int
	for _, m := range b.inflight {
		n += len(m)
	}
	batch := make([]slots.Delta, 0, n)
	for _, m := range b.inflight {
		for k, c := range m {
			if c.n != 0 {
				batch = append(batch, slots.Delta{Key: k, N: c.n})
			}
		}
	}
	return batch
}

// commit writes batch and clears the round from memory, holding the gate
// exclusively so no reader counts it twice or not at all.
func (b *Buffer) commit(ctx context.Context, batch []slots.Delta) error {
	if err := b.gate.Acquire(ctx, maxWeight); err != nil {
		return err
	}
	defer b.gate.Release(maxWeight)
	start := time.Now()
	if len(batch) > 0 {
		if _, err := b.store.Apply(ctx, batch); err != nil {
			return err
		}
		b.m.flushDuration.UpdateDuration(start)
		b.m.batchKeys.Update(float64(len(batch)))
	}
	b.m.flushes.Inc()
	b.inflight = nil
	b.mu.Lock()
	b.done = b.started
	close(b.doneCh)
	b.doneCh = make(chan struct{})
	b.mu.Unlock()
	return nil
}

// backoff is capped exponential backoff with full jitter.
func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt, 6) // caps at 3.2s
	return d/2 + rand.N(d/2)
}
