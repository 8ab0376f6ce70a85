package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/budget"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
)

// newBudgets returns the manager of BUDGET, TAKE and NEXT. Its leases are
// held by the journal's instance id; without a journal it holds none and
// every TAKE is a conditional update in PostgreSQL.
//
// replayed is the last round replayed from the journal (0: none): the
// manager returns an earlier run's leases once it is committed, since
// only then is every grant from them recorded.
func newBudgets(cfg config.Counterd, log *slog.Logger, db *backend, jr *journal.Journal, buf *pending.Buffer, replayed uint64, own *ownership, set *metrics.Set) *budget.Manager {
	var holder, generation string
	if jr != nil {
		holder, generation = jr.InstanceID(), jr.Generation()
	}
	st := db.budgets(generation)
	record := func(c change.Change) (func(context.Context) error, error) {
		items, errs := []change.Change{c}, []error{nil}
		t, err := buf.AddGroup(items, errs)
		if err == nil {
			err = errs[0]
		}
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			if buf.DurableOnAppend() {
				return nil
			}
			return buf.WaitDurable(ctx, t)
		}, nil
	}
	return budget.New(st, budget.Options{
		Holder: holder,
		Record: record,
		Replayed: func(ctx context.Context) error {
			if err := own.waitClaimed(ctx); err != nil {
				return err
			}
			if replayed == 0 {
				return nil
			}
			return buf.WaitCommitted(ctx, replayed)
		},
		KeepEarlier: own.elsewhere,
		TTL:         cfg.LeaseTTL,
		Interval:    cfg.FlushInterval,
		Logger:      log.With("component", "budget"),
		Metrics:     set,
	})
}

// closeBudgets returns this daemon's leases after the final flush.
func closeBudgets(b *budget.Manager, flushed bool, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := b.Close(ctx, flushed); err != nil {
		log.Warn("budget leases not returned; they are returned at the next start, or forfeited after COUNTERD_LEASE_TTL", "err", err)
		return
	}
	log.Info("budget leases returned")
}
