package pending

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"math"
	"time"
	"unsafe"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/windows"
)

// Options configure a Buffer.
type Options struct {
	// Journal, when set, receives every accepted group before it is
	// acknowledged, one segment per round; rounds are numbered by the
	// journal's segments.
	Journal Journal
	// Identity names this run's rounds in the store. Without a journal
	// the zero value means a fresh random identity per Buffer.
	Identity store.Identity
	// Recovered are rounds replayed from the journal, oldest first; they
	// are written before anything new.
	Recovered []Recovered
	// Prepare runs before a round is written until it succeeds once (the
	// daemon migrates the schema there, so it can start without a
	// database).
	Prepare func(context.Context) error
	// Permanent, when set, reports errors of Prepare or of a write that
	// no retry can mend (another daemon took the journal's instance
	// over): Run returns such an error at once, leaving every round in
	// the journal.
	Permanent func(error) bool
	// Interval is how long an accepted change waits for a round while
	// PostgreSQL keeps up.
	Interval time.Duration
	// IntervalMax is the longest an accepted change waits for a round:
	// rounds grow towards it while their writes keep PostgreSQL busy more
	// than half the time (see pacer). At or below Interval (the default)
	// rounds are cut every Interval.
	IntervalMax time.Duration
	// FleetRounds is the rounds a second the whole fleet of daemons on
	// the database aims at (fleet.go): once SetFleet says there are n,
	// rounds last at least n/FleetRounds seconds. 0 turns the rule off.
	FleetRounds float64
	// FleetIntervalMax caps the fleet rule's rounds (0: no cap): the
	// longest an increment waits for a round, unless a waiter cuts it.
	FleetIntervalMax time.Duration
	// RoundTimeout bounds one attempt to write a round (default 30s),
	// with an allowance per change and growth per attempt that ran out of
	// it (deadline.go).
	RoundTimeout time.Duration
	// StallAfter is how long the oldest queued round may wait to commit
	// after its cut before Ready says rounds are not committing (default
	// 5s), plus twice the time its size took at the last measured write
	// rate (deadline.go, stallBound).
	StallAfter time.Duration
	// MaxKeys starts a round early once this many keys are pending.
	MaxKeys int
	// MaxPendingKeys refuses new keys with ErrBackoff past this many.
	MaxPendingKeys int
	// Shards is how many callers accept changes at once through a Shard
	// of their own (the server's event loops): each gets a part of the
	// accumulating round behind its own lock (see shard.go). 0 means
	// every caller shares one.
	Shards int
	// Windows, when not nil, adds each increment of a key it matches to
	// the current bucket of each of the key's windows as well, in the
	// same journal record.
	Windows *windows.Config
	// Clock is the accept clock that picks buckets (default: the host's
	// time at New, advanced by the monotonic clock).
	Clock *windows.Clock
	// Logger receives flush errors.
	Logger *slog.Logger
	// Metrics receives the buffer's metrics; nil means a private set.
	Metrics *metrics.Set
}

// Buffer is the accumulator and the flusher over one store: what the
// server talks to.
type Buffer struct {
	acc     *Accumulator
	flusher *Flusher
}

// New returns a Buffer writing to store. Call Run to start flushing.
func New(st store.Store, opts Options) *Buffer {
	if opts.Interval <= 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if opts.RoundTimeout <= 0 {
		opts.RoundTimeout = 30 * time.Second
	}
	if opts.StallAfter <= 0 {
		opts.StallAfter = 5 * time.Second
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
	if opts.Clock == nil {
		opts.Clock = windows.NewClock(time.Now())
	}
	if opts.Identity == (store.Identity{}) {
		opts.Identity = store.Identity{Instance: randomHex(), Generation: randomHex()}
	}
	f := &Flusher{store: st, opts: opts, doneCh: make(chan struct{}), kick: make(chan struct{}, 1), stopped: make(chan struct{}),
		pace: newPacer(opts.Interval, opts.IntervalMax), now: time.Now}
	a := &Accumulator{
		jr:         opts.Journal,
		id:         opts.Identity,
		nextSeq:    1,
		shards:     make([]*shard, 1+max(opts.Shards, 0)),
		maxKeys:    int64(opts.MaxKeys),
		maxPending: int64(opts.MaxPendingKeys),
		win:        opts.Windows,
		clock:      opts.Clock,
		kick:       f.Kick,
		queue:      f.queue,
	}
	for i := range a.shards {
		a.shards[i] = newShard()
	}
	a.bound = boundFor(len(a.shards))
	f.acc = a
	b := &Buffer{acc: a, flusher: f}
	m := newBufferMetrics(opts.Metrics, b)
	a.m, f.m = m, m
	f.done = a.seq() - 1
	for _, rec := range opts.Recovered {
		cs := newCells(len(rec.Changes), 0)
		for _, c := range rec.Changes {
			cs.restore(c)
		}
		r := &round{id: rec.ID, parts: parts{cs}, recovered: true, queuedAt: time.Now()}
		f.rounds = append(f.rounds, r)
		m.replayedRounds.Inc()
	}
	if len(f.rounds) > 0 {
		f.done = f.rounds[0].id.Seq - 1
	}
	return b
}

func randomHex() string {
	var b [16]byte
	rand.Read(b[:]) // never fails: see crypto/rand.Read
	return hex.EncodeToString(b[:])
}

// Add accepts one plain increment of key's value (change.Plain: INCRBY),
// see AddGroup.
func (b *Buffer) Add(key []byte, delta int64) error {
	// AddGroup copies the key if it keeps it.
	items := [1]change.Change{{Key: unsafe.String(unsafe.SliceData(key), len(key)), Kind: change.Plain(), Delta: delta}}
	var errs [1]error
	if _, err := b.AddGroup(items[:], errs[:]); err != nil {
		return err
	}
	return errs[0]
}

// Shard returns the i-th caller's part of the accept path (see
// Options.Shards); i past Options.Shards wraps around, and without shards
// every caller shares shard 0.
func (b *Buffer) Shard(i int) Shard {
	a := b.acc
	if len(a.shards) == 1 {
		return Shard{a: a, s: a.shards[0]}
	}
	return Shard{a: a, s: a.shards[1+i%(len(a.shards)-1)]}
}

// AddGroup accepts a group of changes; see Accumulator.AddGroup.
func (b *Buffer) AddGroup(items []change.Change, errs []error) (Ticket, error) {
	return b.acc.AddGroup(items, errs)
}

// AddAll accepts all of a group of changes or none; see
// Accumulator.AddAll.
func (b *Buffer) AddAll(items []change.Change, errs []error) (Ticket, error) {
	return b.acc.AddAll(items, errs)
}

// Windows returns the time windows increments are expanded by (nil for
// none).
func (b *Buffer) Windows() *windows.Config { return b.acc.win }

// MaxPendingKeys is the most pending keys the buffer takes
// (Options.MaxPendingKeys; math.MaxInt64 for no limit).
func (b *Buffer) MaxPendingKeys() int64 { return b.acc.maxPending }

// Now reads the accept clock: the time buckets are picked by.
func (b *Buffer) Now() time.Time { return b.acc.clock.Now() }

// DrainAfter returns a context that ends d after ctx ends: the drain
// context for Run, so a shutdown is bounded from the moment it begins.
func DrainAfter(ctx context.Context, d time.Duration) context.Context {
	drain, cancel := context.WithCancel(context.WithoutCancel(ctx))
	context.AfterFunc(ctx, func() { time.AfterFunc(d, cancel) })
	return drain
}

// Run writes rounds until ctx ends, then what remains until drain ends;
// see Flusher.Run.
func (b *Buffer) Run(ctx, drain context.Context) error {
	return b.flusher.Run(ctx, drain)
}

// Flush returns once every change accepted before the call is committed.
func (b *Buffer) Flush(ctx context.Context) error { return b.flusher.Flush(ctx) }

// WaitCommitted returns once round seq and every round before it are
// committed, or ctx ends.
func (b *Buffer) WaitCommitted(ctx context.Context, seq uint64) error {
	return b.flusher.WaitCommitted(ctx, seq)
}

// Kick asks the flusher to start a round now.
func (b *Buffer) Kick() { b.flusher.Kick() }

// Ready returns nil while rounds commit; see Flusher.Ready.
func (b *Buffer) Ready() error { return b.flusher.Ready() }

// Overflowed returns how many keys had a stored total beyond int64 at the
// last check.
func (b *Buffer) Overflowed() int64 { return b.flusher.Overflowed() }

// PendingKeys reports how many distinct counters wait for the next round.
func (b *Buffer) PendingKeys() int { return b.acc.PendingKeys() }

// QueuedRounds reports how many rounds wait to be committed.
func (b *Buffer) QueuedRounds() int { return b.flusher.QueuedRounds() }

// OldestRound is how long the oldest round not yet committed has waited
// since it was cut; 0 when none is queued (counterd_oldest_round_seconds).
func (b *Buffer) OldestRound() time.Duration { return b.flusher.OldestRound() }

// DurableOnAppend reports whether an accepted group is already as durable
// as promised, so WaitDurable would return at once.
func (b *Buffer) DurableOnAppend() bool { return b.acc.jr == nil || !b.acc.jr.SyncsEachAppend() }

// WaitDurable returns once t's journal record is as durable as the
// journal's fsync mode promises.
func (b *Buffer) WaitDurable(ctx context.Context, t Ticket) error {
	if b.acc.jr == nil {
		return nil
	}
	for _, pos := range t.earlier {
		if err := b.acc.jr.WaitDurable(ctx, pos); err != nil {
			return err
		}
	}
	return b.acc.jr.WaitDurable(ctx, t.Pos)
}
