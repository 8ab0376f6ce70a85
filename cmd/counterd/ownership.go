package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/owner"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/store"
)

// ownership binds the journal to its database and claims its instance
// before the first round is written, then heartbeats until the daemon
// stops. Without a journal there is nothing to own. On a cluster the
// instance is claimed on every partition, in partition order (so two
// daemons on copies of one journal meet at partition 0), each claim
// heartbeated on its own, and the journal is bound to partition 0's
// installation.
type ownership struct {
	cfg    config.Counterd
	log    *slog.Logger
	pools  []*pgxpool.Pool
	jr     *journal.Journal
	rounds []pending.Recovered
	fail   context.CancelCauseFunc // stops the daemon when fenced

	// fleetMu guards fleet and fleetN: the live daemons on the database
	// (partition 0's, on a cluster), counted at every heartbeat, go to
	// fleet once the buffer sets it (watchFleet), which may be after the
	// claim.
	fleetMu sync.Mutex
	fleet   func(n int)
	fleetN  int
	// queued, set once the buffer exists (watchQueue), says how many
	// rounds wait to be committed; before that, the rounds replayed.
	queued func() int

	owners  []*owner.Owner // set by claim, before claimed is closed
	claimed chan struct{}  // closed once the instance is claimed
	stopped context.CancelFunc
	done    sync.WaitGroup
}

// permanent reports errors no retry mends: the daemon stops, keeping its
// journal.
func permanent(err error) bool {
	return errors.Is(err, owner.ErrInUse) || errors.Is(err, owner.ErrFenced) ||
		errors.Is(err, owner.ErrOtherDatabase) || errors.Is(err, store.ErrFenced) ||
		errors.Is(err, migrate.ErrTooNew)
}

// claim binds and claims (once; the flusher calls it until it succeeds).
// ctx is the daemon's.
func (o *ownership) claim(ctx context.Context) error {
	if o.jr == nil || o.owners != nil {
		return nil
	}
	cur, err := owner.Current(ctx, o.pools[0])
	if err != nil {
		return err
	}
	rebound, err := owner.Bind(o.jr, o.cfg.JournalDir, cur, len(o.rounds))
	if err != nil {
		return err
	}
	if rebound != nil {
		o.log.Warn("journal moved to another database; it held no rounds to replay", "was", rebound.String(), "now", cur.String())
	}
	c := owner.ThisRun(o.jr.InstanceID(), o.jr.Generation(), o.adopted(), o.cfg.JournalDir, o.jr.DirID())
	owners := make([]*owner.Owner, 0, len(o.pools))
	for i, pool := range o.pools {
		own, err := owner.Acquire(ctx, pool, c, o.cfg.OwnerTTL, o.log)
		if err != nil {
			if len(o.pools) > 1 {
				err = fmt.Errorf("partition %d: %w", i, err)
			}
			return err
		}
		owners = append(owners, own)
	}
	o.log.Info("journal instance claimed", "instance", c.Instance, "generation", c.Generation, "replaying_generations", len(c.Adopted))
	owners[0].OnFleet(o.countedFleet)
	for _, own := range owners {
		own.OnQueued(o.queuedRounds)
	}
	o.owners = owners
	close(o.claimed)
	hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	o.stopped = stop
	for _, own := range owners {
		o.done.Go(func() {
			if err := own.Run(hctx); err != nil {
				o.log.Error("stopping: this daemon no longer owns its journal instance", "err", err)
				o.fail(err)
			}
		})
	}
	return nil
}

// watchFleet passes the live daemons counted at every heartbeat to f,
// the last count at once if there is one.
func (o *ownership) watchFleet(f func(n int)) {
	o.fleetMu.Lock()
	defer o.fleetMu.Unlock()
	o.fleet = f
	if o.fleetN > 0 {
		f(o.fleetN)
	}
}

// watchQueue makes every heartbeat report f's count of queued rounds.
func (o *ownership) watchQueue(f func() int) {
	o.fleetMu.Lock()
	defer o.fleetMu.Unlock()
	o.queued = f
}

// queuedRounds is the count of rounds this run holds uncommitted.
func (o *ownership) queuedRounds() int {
	o.fleetMu.Lock()
	f := o.queued
	o.fleetMu.Unlock()
	if f == nil {
		return len(o.rounds)
	}
	return f()
}

func (o *ownership) countedFleet(n int) {
	o.fleetMu.Lock()
	defer o.fleetMu.Unlock()
	o.fleetN = n
	if o.fleet != nil {
		o.fleet(n)
	}
}

// adopted are the generations of the rounds replayed from the journal.
func (o *ownership) adopted() []string {
	var gens []string
	for _, r := range o.rounds {
		if g := r.ID.Generation; g != "" && !slices.Contains(gens, g) {
			gens = append(gens, g)
		}
	}
	return gens
}

// waitClaimed returns once the instance is claimed, or ctx ends.
func (o *ownership) waitClaimed(ctx context.Context) error {
	select {
	case <-o.claimed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// elsewhere reports whether the instance was taken over from a daemon
// that ran elsewhere and stopped heartbeating (owner.Owner.Elsewhere), on
// any partition. Call it after waitClaimed.
func (o *ownership) elsewhere() bool {
	for _, own := range o.owners {
		if own.Elsewhere() {
			return true
		}
	}
	return false
}

// stop ends the heartbeat.
func (o *ownership) stop() {
	if o.stopped != nil {
		o.stopped()
	}
	o.done.Wait()
}

// release gives the instance up after a clean stop, so a next run
// anywhere need not wait for the lease to run out.
func (o *ownership) release() {
	o.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, own := range o.owners {
		if err := own.Release(ctx); err != nil {
			o.log.Warn("journal instance not released; the next run elsewhere waits COUNTERD_OWNER_TTL for it", "err", err)
		}
	}
}
