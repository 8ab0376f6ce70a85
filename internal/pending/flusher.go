package pending

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/counterd/counterd/internal/store"
)

// overflowCheck is how often the flusher counts stored totals beyond
// int64: often enough for an alert, rare enough to cost nothing.
const overflowCheck = 10 * time.Second

// Flusher writes cut rounds to the store, oldest first.
type Flusher struct {
	acc   *Accumulator
	store store.Store
	opts  Options

	prepared bool      // Prepare has succeeded; Run's goroutine only
	pace     *pacer    // how long rounds accumulate
	lastCut  time.Time // when the last round was cut (or found nothing); Run's goroutine only
	// committedKeys is the size of the round commitOldest last wrote;
	// burstKeys the largest since memory was last released (release.go).
	// Run's goroutine only.
	committedKeys, burstKeys int
	now                      func() time.Time

	mu      sync.Mutex
	rounds  []*round      // cut, not yet committed; oldest first
	done    uint64        // every round up to this seq is committed
	doneCh  chan struct{} // closed and replaced when done advances
	failing error         // the last write's error, nil once one succeeds
	// laterDone is the last round commitLater wrote out of order.
	laterDone uint64
	// outcomes are what committed rounds decided (Buffer.Outcome).
	outcomes outcomes
	failedAt time.Time // when the current run of failures began
	kick     chan struct{}
	stopped  chan struct{} // closed when Run stops for a permanent error
	stopErr  error         // that error; set before stopped is closed

	overflowed atomic.Int64 // keys with a stored total beyond int64
	fleet      atomic.Int64 // live daemons on the database (SetFleet); 0: not known
	perChange  atomic.Int64 // ns a change took in the last large committed round (stallBound)

	m *bufferMetrics
}

// queue appends a cut round. The accumulator calls it under its lock.
func (f *Flusher) queue(r *round) {
	f.mu.Lock()
	r.queuedAt = time.Now()
	f.rounds = append(f.rounds, r)
	f.mu.Unlock()
}

// queued returns the rounds waiting to be committed, oldest first.
func (f *Flusher) queued() []*round {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rounds[:len(f.rounds):len(f.rounds)]
}

// Kick asks the flusher to start a round now.
func (f *Flusher) Kick() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// QueuedRounds reports how many rounds wait to be committed.
func (f *Flusher) QueuedRounds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.rounds)
}

// OldestRound is how long the oldest round not yet committed has waited
// since it was cut (0 with none queued): the staleness of counter_totals
// for this daemon's increments, and what an alert on rounds that do not
// commit watches.
func (f *Flusher) OldestRound() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.rounds) == 0 {
		return 0
	}
	return time.Since(f.rounds[0].queuedAt)
}

// Run flushes rounds until ctx ends, then flushes what remains, retrying
// until drain ends. It returns an error only if changes could not be
// committed by then; they stay in the journal for the next start.
//
// A round is cut one interval (see pacer) after the previous one, or at
// once when the previous write took longer, when Kick is called (a
// waiter: FLUSH, WaitCommitted, COUNTERD_ACK=commit) or when MaxKeys keys
// are pending.
func (f *Flusher) Run(ctx, drain context.Context) error {
	t := time.NewTimer(f.pace.interval())
	defer t.Stop()
	check := time.NewTicker(overflowCheck)
	defer check.Stop()
	f.countOverflows(ctx)
	for {
		timed := false
		select {
		case <-ctx.Done():
			if err := f.flushAll(drain, false, false); err != nil {
				if f.permanent(err) {
					return f.stop(err)
				}
				return fmt.Errorf("final flush: %d rounds and %d keys not committed: %w", f.QueuedRounds(), f.acc.PendingKeys(), err)
			}
			return nil
		case <-t.C:
			timed = true
		case <-f.kick:
		case <-check.C:
			f.countOverflows(ctx)
			continue
		}
		if ctx.Err() != nil {
			continue // shutting down: the final flush above does the rest
		}
		// flushAll retries until it succeeds, ctx ends or the error is
		// permanent.
		if err := f.flushAll(ctx, true, timed); f.permanent(err) {
			return f.stop(err)
		}
		t.Reset(f.pace.next(f.lastCut, f.now()))
	}
}

// Interval returns how long rounds accumulate now: Options.Interval, or
// up to Options.IntervalMax while PostgreSQL is the bottleneck.
func (f *Flusher) Interval() time.Duration { return f.pace.interval() }

// flushAll commits the queued rounds, oldest first, then cuts and commits
// what has accumulated: one round when paced, else until nothing is left
// (the final flush). While the store fails it retries with capped,
// jittered backoff, and accumulates rather than queueing more rounds.
// timed says the pacer's timer asked for the cut: only then does finding
// nothing shrink the interval (a FLUSH right after a paced round finds
// nothing too, whatever PostgreSQL's load). Otherwise someone waits on the
// rounds (a kick, the final flush), and the store may spend more
// connections on them (store.WithUrgent).
func (f *Flusher) flushAll(ctx context.Context, paced, timed bool) error {
	wctx := ctx
	if !timed {
		wctx = store.WithUrgent(ctx)
	}
	cuts := 0
	for attempt := 0; ; {
		if f.QueuedRounds() == 0 {
			if paced && cuts > 0 {
				return nil // the next round waits for its interval
			}
			cut, err := f.acc.Cut()
			if err != nil {
				// Keep accumulating into the open segment; /readyz says
				// rounds are not committing until a cut succeeds.
				f.setHealth(err)
				f.m.flushErrors.Inc()
				f.opts.Logger.Error("cut round", "err", err)
			}
			f.lastCut = f.now()
			if !cut {
				if err == nil {
					f.setHealth(nil) // nothing queued or accumulating
				}
				if err == nil && timed {
					f.pace.idle()
				}
				f.markIdle()
				return err
			}
			cuts++
			f.seal()
		}
		err := f.commitOldest(wctx)
		f.setHealth(err)
		if err == nil {
			f.afterBurst(ctx, f.committedKeys) // the round is unreachable now
			attempt = 0
			continue
		}
		if ctx.Err() != nil || f.permanent(err) {
			// Shutdown cancelled the write; the final flush (or, past
			// its deadline, the next start) writes the round again. Not
			// a failure to report here. A permanent error is Run's to
			// report.
			return err
		}
		if err := f.afterFailure(ctx, err, attempt); err != nil {
			return err
		}
		attempt++
	}
}

// afterFailure reports a failed write of the oldest round and waits
// before the next attempt; it returns err if ctx ends first. While some
// partitions are behind (store.ErrPartial) the others go on committing:
// later rounds are written, a round is cut per interval, and the wait is
// one interval.
func (f *Flusher) afterFailure(ctx context.Context, err error, attempt int) error {
	f.m.flushErrors.Inc()
	f.opts.Logger.Error("flush failed; will retry", "queued_rounds", f.QueuedRounds(), "attempt", attempt+1, "err", err)
	wait := backoff(attempt)
	partial := errors.Is(err, store.ErrPartial)
	if partial {
		f.commitLater(ctx)
		wait = min(wait, f.pace.interval())
	}
	select {
	case <-ctx.Done():
		return err
	case <-time.After(wait):
	}
	if partial {
		f.cutBehind()
	}
	return nil
}

// maxBehindRounds bounds the rounds queued while some partitions are
// behind: past it, changes accumulate into one round, as when the whole
// store fails.
const maxBehindRounds = 256

// cutBehind cuts what accumulated while the oldest round is written on
// some partitions only, so commitLater can write it on the others.
func (f *Flusher) cutBehind() {
	if f.QueuedRounds() >= maxBehindRounds {
		return
	}
	cut, err := f.acc.Cut()
	if err != nil {
		f.opts.Logger.Error("cut round", "err", err)
		return
	}
	if cut {
		f.lastCut = f.now()
		f.seal()
	}
}

// commitLater writes every queued round after the oldest, in order, while
// the oldest is written on some partitions only (store.ErrPartial): the
// store writes each on the partitions that are not behind. A round now
// written everywhere leaves the queue and the journal; the watermark of
// committed rounds (done) moves only with the oldest.
func (f *Flusher) commitLater(ctx context.Context) {
	queued := f.queued()
	for i := 1; i < len(queued); i++ {
		r := queued[i]
		batch := r.batch()
		res, err := f.apply(ctx, r, batch)
		if err != nil {
			if !errors.Is(err, store.ErrPartial) {
				return
			}
			continue
		}
		f.outcomes.record(res.Outcomes)
		f.mu.Lock()
		f.rounds = slices.DeleteFunc(slices.Clone(f.rounds), func(q *round) bool { return q == r })
		f.mu.Unlock()
		f.m.flushes.Inc()
		if !res.Duplicate {
			f.m.keysWritten.Add(len(batch))
		}
		// Its segments are those after the round before it, which stays
		// queued.
		for seq := queued[i-1].id.Seq + 1; seq <= r.id.Seq; seq++ {
			f.removeSegment(seq)
		}
		f.mu.Lock()
		f.laterDone = max(f.laterDone, r.id.Seq)
		f.mu.Unlock()
	}
}

// stop ends the flusher for a permanent error: waiters get it at once.
func (f *Flusher) stop(err error) error {
	err = fmt.Errorf("stopped writing: %d rounds and %d keys not committed: %w", f.QueuedRounds(), f.acc.PendingKeys(), err)
	f.stopErr = err
	close(f.stopped)
	return err
}

// permanent reports whether err is one no retry can mend.
func (f *Flusher) permanent(err error) bool {
	return err != nil && f.opts.Permanent != nil && f.opts.Permanent(err)
}

// seal finishes a rotation outside the shards' locks, so appends
// never wait on the old segment's fsync.
func (f *Flusher) seal() {
	if f.acc.jr == nil {
		return
	}
	if err := f.acc.jr.Seal(); err != nil {
		f.opts.Logger.Error("seal journal segment", "err", err)
	}
}

// commitOldest writes the oldest queued round and drops it from memory
// and the journal. Readers need no coordination: they tell by the lanes'
// watermarks whether a round they hold in memory is in the store yet.
func (f *Flusher) commitOldest(ctx context.Context) error {
	if !f.prepared && f.opts.Prepare != nil {
		pctx, cancel := context.WithTimeout(ctx, f.opts.RoundTimeout)
		err := f.opts.Prepare(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	f.prepared = true
	f.mu.Lock()
	r := f.rounds[0]
	f.mu.Unlock()
	batch := r.batch()
	start := time.Now()
	began := f.now()
	res, err := f.apply(ctx, r, batch)
	if err != nil {
		return fmt.Errorf("commit round %d (%d keys, attempt %d): %w", r.id.Seq, len(batch), r.attempts, err)
	}
	f.outcomes.record(res.Outcomes)
	f.pace.wrote(f.now().Sub(began))
	f.measured(len(batch), f.now().Sub(began))
	f.mu.Lock()
	// A new array, not rounds[1:]: the old one would keep committed
	// rounds, and their maps of every key, alive until it is outgrown;
	// readers may still hold it (queued), so it is not cleared in place.
	rest := f.rounds[1:]
	f.rounds = nil
	if len(rest) > 0 {
		f.rounds = slices.Clone(rest)
	}
	from := f.done + 1
	// Rounds after this one that commitLater wrote are committed too: up
	// to the next round queued, or all of them.
	upTo := r.id.Seq
	if len(f.rounds) > 0 {
		upTo = max(upTo, f.rounds[0].id.Seq-1)
	} else {
		upTo = max(upTo, f.laterDone)
	}
	f.mu.Unlock()

	f.m.flushes.Inc()
	f.m.flushDuration.UpdateDuration(start)
	f.m.batchKeys.Update(float64(len(batch)))
	if res.Duplicate {
		f.duplicate(r)
	} else {
		f.m.keysWritten.Add(len(batch))
	}
	// A round may span several segments when the journal had to move past
	// a broken one; they all lie after the previous round.
	for seq := from; seq <= r.id.Seq; seq++ {
		f.removeSegment(seq)
	}
	f.advance(upTo)
	f.committedKeys = len(batch)
	return nil
}

// duplicate logs a round the store already had. That is expected for a
// round replayed from an earlier run's journal, or retried after a write
// whose reply was lost; a round this run cut and never wrote before
// cannot be a duplicate (its generation is new), so that is an error.
func (f *Flusher) duplicate(r *round) {
	f.m.duplicates.Inc()
	switch {
	case r.recovered:
		f.opts.Logger.Info("replayed round was already committed before the restart; skipped", "round", r.id.Seq, "generation", r.id.Generation)
	case r.attempts > 1:
		f.opts.Logger.Info("round was committed by an earlier attempt whose reply was lost; skipped", "round", r.id.Seq)
	default:
		f.m.identityConflicts.Inc()
		f.opts.Logger.Error("BUG: the store already has a round this run created and never wrote; its changes were not written again",
			"round", r.id.Seq, "instance", r.id.Instance, "generation", r.id.Generation, "keys", len(r.batch()))
	}
}

func (f *Flusher) removeSegment(seq uint64) {
	if f.acc.jr == nil {
		return
	}
	if err := f.acc.jr.Remove(seq); err != nil {
		// The round is committed; replaying the segment later is a
		// recorded duplicate, so this only costs disk until restart.
		f.opts.Logger.Error("remove committed journal segment", "round", seq, "err", err)
	}
}

// markIdle records that nothing is queued or accumulating: every round
// before the accumulating one is committed.
func (f *Flusher) markIdle() {
	f.acc.lockAll()
	seq := f.acc.seq() - 1
	f.acc.unlockAll()
	f.advance(seq)
}

func (f *Flusher) advance(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq <= f.done {
		return
	}
	f.done = seq
	close(f.doneCh)
	f.doneCh = make(chan struct{})
}

// WaitCommitted returns once round seq and every round before it are
// committed, or ctx ends.
func (f *Flusher) WaitCommitted(ctx context.Context, seq uint64) error {
	f.Kick()
	for {
		f.mu.Lock()
		done, ch := f.done, f.doneCh
		f.mu.Unlock()
		if done >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-f.stopped:
			return f.stopErr
		case <-ctx.Done():
			return fmt.Errorf("wait for commit: %w", ctx.Err())
		}
	}
}

// Flush returns once every change accepted before the call is committed,
// or ctx ends.
func (f *Flusher) Flush(ctx context.Context) error {
	f.acc.lockAll()
	target := f.acc.seq()
	if f.acc.keys.Load() == 0 {
		target-- // nothing accumulating: the queued rounds are all there is
	}
	f.acc.unlockAll()
	return f.WaitCommitted(ctx, target)
}

// ErrNotCommitting is wrapped by Ready while rounds fail to commit.
var ErrNotCommitting = errors.New("rounds are not committing")

func (f *Flusher) setHealth(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.failing = nil
		return
	}
	if f.failing == nil {
		f.failedAt = time.Now()
	}
	f.failing = err
}

// Ready returns nil while rounds commit: the last write succeeded, or
// nothing has needed writing, and the oldest queued round has not waited
// longer than it should (stalled). Otherwise the error says since when
// and why they do not.
func (f *Flusher) Ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failing == nil {
		return f.stalled()
	}
	return fmt.Errorf("%w for %s (%d rounds queued): %w", ErrNotCommitting,
		time.Since(f.failedAt).Round(time.Millisecond), len(f.rounds), f.failing)
}

// countOverflows refreshes the count of stored totals beyond int64, once
// the schema is there.
func (f *Flusher) countOverflows(ctx context.Context) {
	if !f.prepared && f.opts.Prepare != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n, err := f.store.Overflows(ctx)
	if err != nil {
		f.opts.Logger.Debug("count totals beyond int64", "err", err)
		return
	}
	if n > 0 && f.overflowed.Load() != n {
		f.opts.Logger.Warn("stored totals beyond int64: GET of these keys is an error until they come back in range (see counter_overflows)", "keys", n)
	}
	f.overflowed.Store(n)
}

// Overflowed returns how many keys had a stored total beyond int64 at the
// last check.
func (f *Flusher) Overflowed() int64 { return f.overflowed.Load() }

// backoff is capped exponential backoff with full jitter.
func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt, 6) // caps at 3.2s
	return d/2 + rand.N(d/2)
}
