package pending

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/counterd/counterd/internal/slots"
)

// Run flushes rounds until ctx ends, then flushes what remains, retrying
// for at most drain. It returns an error only if increments could not be
// committed by then; they stay in the journal for the next start.
func (b *Buffer) Run(ctx context.Context, drain time.Duration) error {
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
			defer cancel()
			if err := b.flushAll(dctx); err != nil {
				return fmt.Errorf("final flush: %d rounds and %d keys not committed: %w", b.QueuedRounds(), b.PendingKeys(), err)
			}
			return nil
		case <-t.C:
		case <-b.kick:
		}
		// flushAll retries until it succeeds or ctx ends.
		_ = b.flushAll(ctx)
	}
}

// flushAll commits the queued rounds, oldest first, then swaps out and
// commits what has accumulated. While the store fails it retries with
// capped, jittered backoff, and accumulates rather than queueing more
// rounds.
func (b *Buffer) flushAll(ctx context.Context) error {
	for attempt := 0; ; {
		if len(b.rounds) == 0 {
			if !b.swap() {
				b.markIdle()
				return nil
			}
			b.seal()
		}
		err := b.commitOldest(ctx)
		if err == nil {
			attempt = 0
			continue
		}
		b.m.flushErrors.Inc()
		b.opts.Logger.Error("flush failed; will retry", "round", b.rounds[0].seq, "queued_rounds", len(b.rounds), "attempt", attempt+1, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff(attempt)):
		}
		attempt++
	}
}

// swap moves the shards into a new round, rotating the journal so the
// round's records are exactly one segment. It reports false when nothing
// was accumulating.
func (b *Buffer) swap() bool {
	b.appendMu.Lock()
	defer b.appendMu.Unlock()
	if b.keys.Load() == 0 {
		return false
	}
	var seq uint64
	if b.jr != nil {
		closed, rotated, err := b.jr.Rotate()
		if err != nil {
			// Keep accumulating into the open segment; the next swap
			// tries again.
			b.opts.Logger.Error("rotate journal", "err", err)
			return false
		}
		if !rotated {
			panic("BUG: keys pending but the journal segment is empty")
		}
		seq = closed
	} else {
		seq = b.nextSeq
		b.nextSeq++
	}
	// Readers never see the round in neither place: it moves from the
	// shards to the queue under the gate, and readers hold the gate while
	// they read both.
	b.mustAcquire()
	defer b.gate.Release(maxWeight)
	r := &round{seq: seq, shards: make([]map[string]*cell, len(b.shards))}
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		r.shards[i] = s.m
		s.m = make(map[string]*cell, len(r.shards[i]))
		b.keys.Add(-int64(len(r.shards[i])))
		s.mu.Unlock()
	}
	b.rounds = append(b.rounds, r)
	b.queued.Store(int64(len(b.rounds)))
	return true
}

// seal finishes a rotation outside appendMu, so appends never wait on the
// old segment's fsync.
func (b *Buffer) seal() {
	if b.jr == nil {
		return
	}
	if err := b.jr.Seal(); err != nil {
		b.opts.Logger.Error("seal journal segment", "err", err)
	}
}

// mustAcquire takes the gate exclusively; it cannot fail without a
// deadline.
func (b *Buffer) mustAcquire() {
	if err := b.gate.Acquire(context.Background(), maxWeight); err != nil {
		panic("BUG: acquire without a deadline failed: " + err.Error())
	}
}

// commitOldest writes the oldest queued round and drops it from memory
// and the journal, holding the gate exclusively while it commits so no
// reader counts it twice or not at all.
func (b *Buffer) commitOldest(ctx context.Context) error {
	if !b.prepared && b.opts.Prepare != nil {
		if err := b.opts.Prepare(ctx); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	b.prepared = true
	r := b.rounds[0]
	batch := r.batch()
	if err := b.gate.Acquire(ctx, maxWeight); err != nil {
		return err
	}
	start := time.Now()
	var (
		res slots.ApplyResult
		err error
	)
	if b.jr != nil {
		res, err = b.store.ApplyOnce(ctx, slots.BatchID{Instance: b.jr.InstanceID(), Seq: r.seq}, batch)
	} else {
		res, err = b.store.Apply(ctx, batch)
	}
	if err != nil {
		b.gate.Release(maxWeight)
		return fmt.Errorf("commit round %d (%d keys): %w", r.seq, len(batch), err)
	}
	b.rounds = b.rounds[1:]
	b.queued.Store(int64(len(b.rounds)))
	b.gate.Release(maxWeight)

	b.m.flushes.Inc()
	b.m.flushDuration.UpdateDuration(start)
	b.m.batchKeys.Update(float64(len(batch)))
	if res.Duplicate {
		b.m.duplicates.Inc()
		b.opts.Logger.Info("round was already committed; skipped", "round", r.seq)
	} else {
		b.m.keysWritten.Add(len(batch))
	}
	// A round may span several segments when the journal had to move past
	// a broken one; they all lie after the previous round.
	b.mu.Lock()
	from := b.done + 1
	b.mu.Unlock()
	for seq := from; seq <= r.seq; seq++ {
		b.removeSegment(seq)
	}
	b.advance(r.seq)
	return nil
}

func (b *Buffer) removeSegment(seq uint64) {
	if b.jr == nil {
		return
	}
	if err := b.jr.Remove(seq); err != nil {
		// The round is committed; replaying the segment later is a
		// recorded duplicate, so this only costs disk until restart.
		b.opts.Logger.Error("remove committed journal segment", "round", seq, "err", err)
	}
}

// markIdle records that nothing is queued or accumulating: every round
// before the accumulating one is committed.
func (b *Buffer) markIdle() {
	b.appendMu.Lock()
	seq := b.accumulating() - 1
	b.appendMu.Unlock()
	b.advance(seq)
}

func (b *Buffer) advance(seq uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if seq <= b.done {
		return
	}
	b.done = seq
	close(b.doneCh)
	b.doneCh = make(chan struct{})
}

func (r *round) batch() []slots.Delta {
	var n int
	for _, m := range r.shards {
		n += len(m)
	}
	batch := make([]slots.Delta, 0, n)
	for _, m := range r.shards {
		for k, c := range m {
			if c.n != 0 || c.v != 0 {
				batch = append(batch, slots.Delta{Key: k, N: c.n, Var: c.v})
			}
		}
	}
	return batch
}

// backoff is capped exponential backoff with full jitter.
func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt, 6) // caps at 3.2s
	return d/2 + rand.N(d/2)
}
