package pending

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/VictoriaMetrics/metrics"
	"golang.org/x/sync/semaphore"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/slots"
)

// ErrBackoff is returned for an increment of a new key while too many keys
// are pending: the client should retry later.
var ErrBackoff = errors.New("too many pending keys, back off and retry")

// ErrOverflow is returned when a key's pending delta would overflow int64.
var ErrOverflow = errors.New("increment or decrement would overflow")

// Store is where rounds are written and totals read.
type Store interface {
	Apply(ctx context.Context, batch []slots.Delta) (slots.ApplyResult, error)
	ApplyOnce(ctx context.Context, id slots.BatchID, batch []slots.Delta) (slots.ApplyResult, error)
	Estimates(ctx context.Context, keys []string) ([]slots.Estimate, error)
}

// Options configure a Buffer.
type Options struct {
	// Journal, when set, receives every accepted group before it is
	// acknowledged, one segment per round; rounds are then written with
	// the journal's instance id and segment number as their identity.
	Journal *journal.Journal
	// Recovered are the journal's segments from before a restart; they
	// are written first, in order.
	Recovered []journal.Segment
	// Prepare runs before a round is written until it succeeds once (the
	// daemon migrates the schema there, so it can start without a
	// database).
	Prepare func(context.Context) error
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
	store Store
	jr    *journal.Journal
	opts  Options
	seed  maphash.Seed

	// appendMu orders "journal a group, then fold it into the shards"
	// against swapping the shards into a round, so every record of a
	// segment is in that segment's round.
	appendMu sync.Mutex
	nextSeq  uint64 // without a journal: the seq of the accumulating round
	scratch  []change.Change
	isNew    []bool

	shards []shard
	keys   atomic.Int64 // distinct keys in the shards

	// gate is held shared by readers, exclusively while rounds are queued
	// or while the oldest one commits and leaves the queue.
	gate   *semaphore.Weighted
	rounds []*round // swapped out, not yet committed; oldest first
	queued atomic.Int64

	prepared bool // Prepare has succeeded; flusher goroutine only

	mu     sync.Mutex
	done   uint64        // every round up to this seq is committed
	doneCh chan struct{} // closed and replaced when done advances
	kick   chan struct{}

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

type cell struct {
	n int64
	v float64 // variance of the sampled increments in n
}

// round is one batch on its way to the store.
type round struct {
	seq    uint64
	shards []map[string]*cell
}

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
		store:   store,
		jr:      opts.Journal,
		opts:    opts,
		seed:    maphash.MakeSeed(),
		shards:  make([]shard, opts.Shards),
		gate:    semaphore.NewWeighted(maxWeight),
		doneCh:  make(chan struct{}),
		kick:    make(chan struct{}, 1),
		nextSeq: 1,
	}
	for i := range b.shards {
		b.shards[i].m = make(map[string]*cell)
	}
	b.m = newBufferMetrics(opts.Metrics, b)
	b.done = b.accumulating() - 1
	for _, seg := range opts.Recovered {
		if seg.Records == 0 {
			b.removeSegment(seg.Seq)
			continue
		}
		r := &round{seq: seg.Seq, shards: b.newMaps()}
		for _, c := range seg.Changes { // all of kind Total, the only kind so far
			r.shards[b.shardOf(c.Key)][c.Key] = &cell{n: c.Delta, v: c.Var}
		}
		b.rounds = append(b.rounds, r)
		b.m.replayedRounds.Inc()
	}
	if len(b.rounds) > 0 {
		b.done = b.rounds[0].seq - 1
	}
	b.queued.Store(int64(len(b.rounds)))
	return b
}

func (b *Buffer) newMaps() []map[string]*cell {
	ms := make([]map[string]*cell, len(b.shards))
	for i := range ms {
		ms[i] = make(map[string]*cell)
	}
	return ms
}

// accumulating is the seq of the round now collecting increments. The
// caller holds appendMu, or no other goroutine runs yet.
func (b *Buffer) accumulating() uint64 {
	if b.jr != nil {
		return b.jr.Current()
	}
	return b.nextSeq
}

func (b *Buffer) shardOf(key string) int {
	return int(maphash.String(b.seed, key) % uint64(len(b.shards)))
}

// Ticket says where an accepted group went: the journal position to wait
// on for fsync, and the round to wait on for commit.
type Ticket struct {
	Pos journal.Position
	Seq uint64
	// Recorded counts the items that changed a pending delta; a group
	// whose increments were all sampled out has nothing to wait for.
	Recorded int
}

// Add accepts one increment (see AddGroup).
func (b *Buffer) Add(key []byte, delta int64) error {
	// Key aliases key, like a Change on the accept path: add clones it.
	items := [1]change.Change{{Key: unsafe.String(unsafe.SliceData(key), len(key)), Kind: change.Total, Delta: delta}}
	var errs [1]error
	if _, err := b.AddGroup(items[:], errs[:]); err != nil {
		return err
	}
	return errs[0]
}

// AddGroup accepts a group of increments: each is checked (errs[i] gets
// ErrOverflow or ErrBackoff for one refused), the accepted ones are
// appended to the journal as one record and folded into their keys'
// pending deltas. If the journal append fails, nothing of the group is
// accepted and the error is returned. len(errs) must be len(items).
func (b *Buffer) AddGroup(items []change.Change, errs []error) (Ticket, error) {
	b.appendMu.Lock()
	defer b.appendMu.Unlock()
	acc := b.scratch[:0]
	isNew := b.isNew[:0]
	for i, it := range items {
		if it.Delta == 0 && it.Var == 0 {
			errs[i] = nil // sampled out, or INCRBY 0: nothing to record
			continue
		}
		fresh, err := b.add(it.Key, it.Delta, it.Var)
		errs[i] = err
		if err == nil {
			acc = append(acc, it)
			isNew = append(isNew, fresh)
		}
	}
	b.scratch, b.isNew = acc[:0], isNew[:0]
	var t Ticket
	if b.jr != nil && len(acc) > 0 {
		pos, err := b.jr.Append(acc)
		if err != nil {
			for i, it := range acc {
				b.undo(it, isNew[i])
			}
			b.m.rejected.Add(len(acc))
			return t, err
		}
		t.Pos = pos
	}
	t.Seq = b.accumulating()
	t.Recorded = len(acc)
	b.m.accepted.Add(len(acc))
	return t, nil
}

// add folds delta into key's pending delta and reports whether the key was
// new. The caller holds appendMu.
func (b *Buffer) add(key string, delta int64, variance float64) (bool, error) {
	s := &b.shards[b.shardOf(key)]
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.m[key]
	fresh := c == nil
	if fresh {
		if b.keys.Load() >= int64(b.opts.MaxPendingKeys) {
			b.m.rejected.Inc()
			return false, ErrBackoff
		}
		if b.keys.Add(1) == int64(b.opts.MaxKeys) {
			b.Kick()
		}
		c = &cell{}
		s.m[strings.Clone(key)] = c // key may alias a connection's read buffer
	}
	sum, err := addChecked(c.n, delta)
	if err != nil {
		if fresh {
			delete(s.m, key)
			b.keys.Add(-1)
		}
		b.m.rejected.Inc()
		return false, ErrOverflow
	}
	c.n = sum
	c.v += variance
	return fresh, nil
}

// undo reverses an add whose journal append failed. The caller holds
// appendMu, so no swap has moved the key since.
func (b *Buffer) undo(it change.Change, isNew bool) {
	s := &b.shards[b.shardOf(it.Key)]
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.m[it.Key]
	c.n -= it.Delta
	c.v -= it.Var
	if isNew {
		delete(s.m, it.Key)
		b.keys.Add(-1)
	}
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

// QueuedRounds reports how many rounds wait to be committed.
func (b *Buffer) QueuedRounds() int { return int(b.queued.Load()) }

// Get returns each key's exact total: the store's total plus what this
// buffer holds, accumulating and queued.
func (b *Buffer) Get(ctx context.Context, keys []string) ([]int64, error) {
	est, err := b.Estimates(ctx, keys)
	if err != nil {
		return nil, err
	}
	totals := make([]int64, len(est))
	for i, e := range est {
		totals[i] = e.Total
	}
	return totals, nil
}

// Estimates returns each key's total, as Get does, with the variance of
// its sampled increments.
func (b *Buffer) Estimates(ctx context.Context, keys []string) ([]slots.Estimate, error) {
	if err := b.gate.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("wait for the round being committed: %w", err)
	}
	defer b.gate.Release(1)
	est, err := b.store.Estimates(ctx, keys)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		n, v, err := b.local(k)
		if err == nil {
			est[i].Total, err = addChecked(est[i].Total, n)
		}
		if err != nil {
			return nil, fmt.Errorf("total of %q: %w", k, err)
		}
		est[i].Var += v
	}
	return est, nil
}

// local is key's pending delta and variance in the shards and every queued
// round. The caller holds the gate.
func (b *Buffer) local(key string) (int64, float64, error) {
	i := b.shardOf(key)
	s := &b.shards[i]
	var (
		sum int64
		v   float64
	)
	s.mu.Lock()
	if c := s.m[key]; c != nil {
		sum, v = c.n, c.v
	}
	s.mu.Unlock()
	for _, r := range b.rounds {
		if c := r.shards[i][key]; c != nil {
			var err error
			if sum, err = addChecked(sum, c.n); err != nil {
				return 0, 0, err
			}
			v += c.v
		}
	}
	return sum, v, nil
}

func addChecked(a, b int64) (int64, error) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, slots.ErrOverflow
	}
	return s, nil
}

// Flush returns once every increment accepted before the call is
// committed, or ctx ends.
func (b *Buffer) Flush(ctx context.Context) error {
	b.appendMu.Lock()
	target := b.accumulating()
	if b.keys.Load() == 0 {
		target-- // nothing accumulating: the queued rounds are all there is
	}
	b.appendMu.Unlock()
	return b.WaitCommitted(ctx, target)
}

// WaitCommitted returns once round seq and every round before it are
// committed, or ctx ends.
func (b *Buffer) WaitCommitted(ctx context.Context, seq uint64) error {
	b.Kick()
	for {
		b.mu.Lock()
		done, ch := b.done, b.doneCh
		b.mu.Unlock()
		if done >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for commit: %w", ctx.Err())
		}
	}
}

// DurableOnAppend reports whether an accepted group is already as durable
// as promised, so WaitDurable would return at once.
func (b *Buffer) DurableOnAppend() bool { return b.jr == nil || !b.jr.SyncsEachAppend() }

// WaitDurable returns once t's journal record is as durable as the
// journal's fsync mode promises.
func (b *Buffer) WaitDurable(ctx context.Context, t Ticket) error {
	if b.jr == nil {
		return nil
	}
	return b.jr.WaitDurable(ctx, t.Pos)
}
