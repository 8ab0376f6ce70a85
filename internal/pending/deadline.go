package pending

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Deadlines that fit a round. A round cut after an outage holds what
// accumulated meanwhile (millions of changes), and a fixed deadline that
// an ordinary round meets by far was one such a round missed on every
// attempt. So an attempt gets RoundTimeout plus an allowance per change,
// and a round whose attempt ran out of its deadline gets twice as long
// the next time, up to maxDeadlineDoublings times; the store meanwhile
// commits a large round in several transactions, which a retry skips
// (slots/bound.go), so every attempt moves it forward.

// perChangeAllowance is an attempt's time per change of its round, beyond
// RoundTimeout: what the costliest kind takes in one transaction on a
// loaded 2-core machine (two million INCRONCE views of one key, one lane,
// so one transaction: 180 s, 90 µs a view), so that such a round gets
// 30 s + 200 s on its first attempt; at 20 µs its first two attempts
// (70 s and 139 s) ran out and it committed on the third, 398 s after
// the outage.
const perChangeAllowance = 100 * time.Microsecond

// maxDeadlineDoublings bounds the growth: an attempt waiting on a
// connection that never answers is given up within 8x its first deadline.
const maxDeadlineDoublings = 3

// roundDeadline is how long an attempt at writing a round of n changes
// may take after timeouts of its attempts ran out of their deadlines.
func (f *Flusher) roundDeadline(n, timeouts int) time.Duration {
	d := f.opts.RoundTimeout + time.Duration(n)*perChangeAllowance
	return d << min(timeouts, maxDeadlineDoublings)
}

// apply makes one attempt at writing r (whose changes are batch) within
// its deadline.
func (f *Flusher) apply(ctx context.Context, r *round, batch []change.Change) (store.ApplyResult, error) {
	f.mu.Lock()
	r.attempts++
	timeouts := r.timeouts
	f.mu.Unlock()
	deadline := f.roundDeadline(len(batch), timeouts)
	wctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	res, err := f.store.ApplyOnce(wctx, r.id, batch)
	if err != nil && ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
		f.mu.Lock()
		r.timeouts++
		f.mu.Unlock()
		err = fmt.Errorf("deadline of %s: %w", deadline, err)
	}
	// What committed of a round that failed in part (some of its
	// transactions or partitions) is decided once: keep it for the
	// attempt that completes the round.
	switch {
	case err != nil && len(res.Outcomes) > 0:
		if r.outcomes == nil {
			r.outcomes = make(map[string]int64, len(res.Outcomes))
		}
		maps.Copy(r.outcomes, res.Outcomes)
	case err == nil && r.outcomes != nil:
		maps.Copy(r.outcomes, res.Outcomes)
		res.Outcomes, r.outcomes = r.outcomes, nil
	}
	return res, err
}

// stalled says why rounds are not committing when the oldest queued
// round has waited longer than its stall bound since it was cut, nil
// otherwise. f.mu is held.
func (f *Flusher) stalled() error {
	if len(f.rounds) == 0 {
		return nil
	}
	r := f.rounds[0]
	waited := time.Since(r.queuedAt)
	if waited <= f.stallBound(r.len()) {
		return nil
	}
	state := "not yet attempted"
	if r.attempts > 0 {
		state = fmt.Sprintf("attempt %d still running", r.attempts)
	}
	return fmt.Errorf("%w: round %d queued for %s, %s (%d rounds queued)", ErrNotCommitting,
		r.id.Seq, waited.Round(time.Second), state, len(f.rounds))
}

// stallBound is how long a round of n changes may wait after its cut
// before Ready says rounds are not committing: StallAfter, plus twice
// what n changes took at the rate the last large committed round was
// written (0 until one was), up to the round's first deadline. A fixed
// 5 s turned /readyz 503 several times a minute under a steady 35,000
// operations a second, whose ordinary rounds of 300,000 keys take longer
// than that to write.
func (f *Flusher) stallBound(n int) time.Duration {
	write := time.Duration(n) * time.Duration(f.perChange.Load())
	return f.opts.StallAfter + min(2*write, f.roundDeadline(n, 0))
}

// measuredRoundMin is the smallest committed round whose write time per
// change stallBound uses: smaller ones are mostly a commit's fixed cost.
const measuredRoundMin = 1000

// measured records the write time of a committed round of n changes.
func (f *Flusher) measured(n int, took time.Duration) {
	if n >= measuredRoundMin {
		f.perChange.Store(int64(took) / int64(n))
	}
}
