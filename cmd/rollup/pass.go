package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/targets"
)

// roller runs rollup passes against one store.
type roller struct {
	cfg   config.Rollup
	log   *slog.Logger
	store *slots.Store
	tset  *targets.Set
	set   *metrics.Set
	miss  *missingRows
	// pool is the store's pool (two connections), for a set reconcile.
	pool *pgxpool.Pool
	// sets runs ROLLUP_SET_RECONCILE; nil when unset.
	sets *setReconciler
	// stdout, when set (rollup once), gets a summary of each pass for
	// the operator who ran it; the scheduler's passes are the structured
	// log record only, so its output is all log records (JSON with
	// ROLLUP_LOG_FORMAT=json).
	stdout io.Writer
}

// passResult is what one pass did, step by step.
type passResult struct {
	fold    slots.FoldResult
	foldErr error
	buckets slots.BucketFoldResult
	expired slots.ExpireResult
	pruned  int64
	kinds   []slots.Pruned // what each kind pruned (INCRONCE's seen entries)
	sets    reconcileResult
	took    time.Duration
}

// pass folds slot rows into counters (and targets), then folds and
// expires buckets, expires keys and prunes instances, and reports.
func (r *roller) pass(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	start := time.Now()
	var p passResult
	r.miss.startPass()
	p.fold, p.foldErr = r.store.Fold(pctx, slots.FoldOptions{Chunk: r.cfg.Chunk, MaxDuration: r.cfg.MaxPass,
		Targets: r.tset, OnMissing: r.miss.record})
	r.miss.log(ctx, r.log)
	if p.foldErr != nil && p.fold.Skipped == 0 {
		return fmt.Errorf("rollup pass: %w", p.foldErr)
	}
	// Rows skipped for their data still let every other key fold,
	// so the pass reports, expires and prunes before it fails.
	if err := r.clean(pctx, start, &p); err != nil {
		return fmt.Errorf("rollup pass: %w", err)
	}
	// The sets are reconciled last: what the fold and prune did does not
	// change a set's members.
	if r.sets != nil && r.sets.due(start, r.stdout != nil) {
		var err error
		p.sets, err = r.sets.run(pctx, r.pool, r.log)
		p.sets.log(ctx, r.log)
		if err != nil {
			return fmt.Errorf("rollup pass: %w", err)
		}
	}
	p.took = time.Since(start).Round(time.Millisecond)
	r.report(ctx, p)
	if p.foldErr != nil {
		return fmt.Errorf("rollup pass: %w", p.foldErr)
	}
	return nil
}

// clean is the part of a pass after the fold of totals began at start:
// buckets, expired keys, stale instances, then what each kind prunes
// (INCRONCE's seen entries past their window).
func (r *roller) clean(ctx context.Context, start time.Time, p *passResult) error {
	var err error
	if p.buckets, err = foldBuckets(ctx, r.store, r.cfg, start); err != nil {
		return err
	}
	if p.expired, err = r.store.Expire(ctx, slots.ExpireOptions{MaxDuration: r.cfg.MaxPass}); err != nil {
		return err
	}
	if p.pruned, err = r.store.PruneInstances(ctx, time.Now().Add(-r.cfg.PruneAfter)); err != nil {
		return err
	}
	p.kinds, err = r.store.Prune(ctx, slots.PruneOptions{Slack: r.cfg.SeenSlack,
		SetTombstoneSlack: r.cfg.SetTombstoneSlack, Chunk: r.cfg.Chunk})
	return err
}

// idle says the pass found nothing to do.
func (p passResult) idle() bool {
	for _, k := range p.kinds {
		if k.Rows != 0 {
			return false
		}
	}
	return p.fold.Rows == 0 && p.fold.Skipped == 0 && p.pruned == 0 && p.foldErr == nil &&
		p.buckets.Rows == 0 && p.buckets.Expired == 0 && p.expired.Keys == 0
}

// report logs the pass and, for rollup once, prints its summary.
func (r *roller) report(ctx context.Context, p passResult) {
	// A pass that found nothing to do is routine: debug, so an idle
	// scheduler's log stays quiet.
	level := slog.LevelInfo
	if p.idle() {
		level = slog.LevelDebug
	}
	res, buckets, expired := p.fold, p.buckets, p.expired
	attrs := []any{"slot_rows", res.Rows, "keys", res.Keys, "chunks", res.Chunks,
		"limited", res.Limited || buckets.Limited || expired.Limited, "skipped", res.Skipped, "left", res.Left,
		"bucket_slots_folded", buckets.Rows, "buckets", buckets.Buckets, "expired_buckets", buckets.Expired,
		"expired_keys", expired.Keys, "pruned_instances", p.pruned}
	for _, k := range p.kinds {
		attrs = append(attrs, k.Name, k.Rows) // pruned_seen
	}
	r.log.Log(ctx, level, "rollup pass", append(attrs, "took", p.took)...)
	if r.stdout == nil {
		return
	}
	fmt.Fprintf(r.stdout, "folded %d slot rows into %d keys in %d chunks in %v; %s\n", res.Rows, res.Keys, res.Chunks, p.took, left(res))
	if expired.Keys > 0 {
		fmt.Fprintf(r.stdout, "deleted %d expired keys in %d chunks\n", expired.Keys, expired.Chunks)
	}
	if p.sets.ran {
		fmt.Fprintf(r.stdout, "reconciled %d set keys with the app's table in %v: added %d members, removed %d\n",
			p.sets.keys, p.sets.took, p.sets.added, p.sets.removed)
	}
}

// foldBuckets folds time-window bucket slot rows and deletes buckets past
// their keep_until, within what is left of ROLLUP_MAX_PASS after the fold
// of totals began at start.
func foldBuckets(ctx context.Context, store *slots.Store, cfg config.Rollup, start time.Time) (slots.BucketFoldResult, error) {
	var res slots.BucketFoldResult
	left := cfg.MaxPass - time.Since(start)
	if left <= 0 {
		res.Limited = true
		return res, nil
	}
	res, err := store.FoldBuckets(ctx, slots.FoldOptions{Chunk: cfg.Chunk, MaxDuration: left})
	if err != nil {
		return res, err
	}
	if left = cfg.MaxPass - time.Since(start); left <= 0 {
		res.Limited = true
		return res, nil
	}
	expired, limited, err := store.ExpireBuckets(ctx, time.Time{}, slots.FoldOptions{Chunk: cfg.Chunk, MaxDuration: left})
	res.Expired, res.Limited = expired, res.Limited || limited
	return res, err
}

// left describes what a pass left behind.
func left(res slots.FoldResult) string {
	s := fmt.Sprintf("%d slot rows left", res.Left)
	if res.Limited {
		s += " (pass ended at ROLLUP_MAX_PASS)"
	}
	if res.Skipped > 0 {
		s += fmt.Sprintf(", %d skipped for errors", res.Skipped)
	}
	if res.Missing > 0 {
		s += fmt.Sprintf(", %d target keys with no row (in counters only)", res.Missing)
	}
	return s
}
