package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/admin"
	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/database"
	"github.com/counterd/counterd/internal/logging"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/targets"
	"github.com/counterd/counterd/internal/version"
)

// usageError is a bad command line or setting: exit code 2.
type usageError struct{ error }

const usage = `usage: rollup [once]

  rollup       fold slot rows into counters on ROLLUP_SCHEDULE until SIGTERM
  rollup once  fold once and exit
  rollup --version  print the version and exit

Settings come from the environment:

`

func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	cmd := "schedule"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch {
	case cmd == "--version" || cmd == "-version" || cmd == "version":
		fmt.Fprintln(stdout, version.String("rollup"))
		return nil
	case cmd == "-h" || cmd == "--help" || cmd == "help":
		fmt.Fprint(stdout, usage)
		config.Usage[config.Rollup](stdout)
		return nil
	case len(args) > 1 || (cmd != "schedule" && cmd != "once"):
		return usageError{fmt.Errorf("unknown arguments %q; run rollup -h", args)}
	}
	cfg, err := config.Load[config.Rollup](environ)
	if err != nil {
		return usageError{err}
	}
	log := logging.New(stderr, cfg.LogLevel, cfg.LogFormat)
	pool, err := database.Open(cfg.DatabaseURL, database.Options{
		MaxConns:         2,
		StatementTimeout: cfg.StatementTimeout,
		LockTimeout:      cfg.LockTimeout,
	})
	if err != nil {
		return usageError{err} // Open does not connect: a failure is a bad setting
	}
	defer pool.Close()
	if err := database.Wait(ctx, pool, 10*time.Second); err != nil {
		if ctx.Err() != nil {
			// SIGINT or SIGTERM while it waited (Ctrl-C in make run):
			// nothing had started, so this is a clean stop.
			log.Info("stopped before the database answered")
			return nil
		}
		return err
	}
	// The daemon owns the schema; rollup only needs it to exist.
	store, err := slots.New(pool, slots.Options{})
	if err != nil {
		return err
	}
	tset, err := targets.Parse(cfg.Targets)
	if err != nil {
		return usageError{fmt.Errorf("ROLLUP_TARGETS: %w", err)}
	}
	// A target the catalog does not back is a bad setting: refuse to
	// start rather than fold into counters alone.
	if err := tset.Resolve(ctx, pool); err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before the first pass")
			return nil
		}
		return usageError{fmt.Errorf("ROLLUP_TARGETS: %w", err)}
	}
	for _, t := range tset.Targets() {
		log.Info("rollup target", "pattern", t.Pattern, "column", t.Qualified())
	}
	set := metrics.NewSet()
	miss := newMissing(set, tset)
	if cmd != "once" && cfg.MetricsAddr != config.MetricsOff {
		addr, err := admin.Serve(ctx, cfg.MetricsAddr, admin.Handler([]*metrics.Set{set}, nil, false))
		if err != nil {
			return err
		}
		log.Info("metrics listening", "addr", addr.String())
	}
	pass := func() error {
		pctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		start := time.Now()
		miss.startPass()
		res, foldErr := store.Fold(pctx, slots.FoldOptions{Chunk: cfg.Chunk, MaxDuration: cfg.MaxPass,
			Targets: tset, OnMissing: miss.record})
		miss.log(ctx, log)
		if foldErr != nil && res.Skipped == 0 {
			return fmt.Errorf("rollup pass: %w", foldErr)
		}
		// Rows skipped for their data still let every other key fold,
		// so the pass reports, expires and prunes before it fails.
		buckets, err := foldBuckets(pctx, store, cfg, start)
		if err != nil {
			return fmt.Errorf("rollup pass: %w", err)
		}
		expired, err := store.Expire(pctx, slots.ExpireOptions{MaxDuration: cfg.MaxPass})
		if err != nil {
			return fmt.Errorf("rollup pass: %w", err)
		}
		pruned, err := store.PruneInstances(pctx, time.Now().Add(-cfg.PruneAfter))
		if err != nil {
			return fmt.Errorf("rollup pass: %w", err)
		}
		took := time.Since(start).Round(time.Millisecond)
		// A pass that found nothing to do is routine: debug, so an idle
		// scheduler's log stays quiet.
		level := slog.LevelInfo
		if res.Rows == 0 && res.Skipped == 0 && pruned == 0 && foldErr == nil && buckets.Rows == 0 && buckets.Expired == 0 && expired.Keys == 0 {
			level = slog.LevelDebug
		}
		log.Log(ctx, level, "rollup pass", "slot_rows", res.Rows, "keys", res.Keys, "chunks", res.Chunks,
			"limited", res.Limited || buckets.Limited || expired.Limited, "skipped", res.Skipped, "left", res.Left,
			"bucket_slots_folded", buckets.Rows, "buckets", buckets.Buckets, "expired_buckets", buckets.Expired,
			"expired_keys", expired.Keys, "pruned_instances", pruned, "took", took)
		// rollup once reports on stdout for the operator who ran it; the
		// scheduler's passes are the structured record above only, so its
		// output is all log records (JSON with ROLLUP_LOG_FORMAT=json).
		if cmd == "once" {
			fmt.Fprintf(stdout, "folded %d slot rows into %d keys in %d chunks in %v; %s\n", res.Rows, res.Keys, res.Chunks, took, left(res))
			if expired.Keys > 0 {
				fmt.Fprintf(stdout, "deleted %d expired keys in %d chunks\n", expired.Keys, expired.Chunks)
			}
		}
		if foldErr != nil {
			return fmt.Errorf("rollup pass: %w", foldErr)
		}
		return nil
	}
	if cmd == "once" {
		return pass()
	}
	return schedule(ctx, cfg.Schedule, log, pass)
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

// schedule runs pass on spec until ctx ends. A pass never overlaps the
// previous one; a failed pass is logged and the next one tries again.
func schedule(ctx context.Context, spec string, log *slog.Logger, pass func() error) error {
	c := cron.New(cron.WithChain(cron.SkipIfStillRunning(cron.DiscardLogger)))
	if _, err := c.AddFunc(spec, func() {
		if err := pass(); err != nil {
			if ctx.Err() != nil {
				// SIGTERM cancelled the pass; its chunks are atomic, so
				// nothing is half done. Not an error.
				log.Info("rollup pass cut short by shutdown", "err", err)
				return
			}
			log.Error("rollup pass failed", "err", err)
		}
	}); err != nil {
		return usageError{fmt.Errorf("ROLLUP_SCHEDULE: %w", err)}
	}
	log.Info("rollup scheduled", "schedule", spec)
	c.Start()
	<-ctx.Done()
	<-c.Stop().Done()
	log.Info("rollup stopped")
	return nil
}
