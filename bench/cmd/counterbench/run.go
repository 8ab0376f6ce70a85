package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/counterd/counterd/bench/internal/peer"
	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/config"
)

// usageError is a bad command line or setting: exit code 2.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

const usage = `usage: counterbench

Measures counting into PostgreSQL: the patterns an application can use on
its own, counterd, redis-server for reference and the Redis-buffer-plus-
worker pattern (redis-server buffering HINCRBY, a worker moving the buffer
into PostgreSQL every second: "counterbench peer-worker", started by the
run itself); unique counts (PFADD
against INCR and redis-server's PFADD, INCRONCE); exact sets (SADD
against INCR, redis-server's SADD and an application's likes table);
and bounded budgets
(seed 000) and ticket draws (seed 004) the same way. Writes bench.md,
bench.csv and bench.png (and, for the sustain section, sustain.png and
sustain.csv; for the budget and tickets sections, budgets.csv) into
COUNTERBENCH_OUT, and there too everything counterd and redis-server
print, to counterd.log, counterd-uniques.log, counterd-partitions.log, counterd-fleet.log,
counterd-budget.log, redis-server.log and peer-worker.log. "make bench" builds counterd,
starts a throwaway PostgreSQL and runs this; COUNTERBENCH_SECTIONS=uniques
make bench runs only the unique counts. The partitions section declares
PL/Proxy clusters with scripts/cluster.sh (databases SCHEMA_N_proxy and
SCHEMA_N_p0 ... on DATABASE_URL's server, dropped and recreated); the
fleet section, a database of its own there (SCHEMA_fleet, likewise).

Settings come from the environment:

`

func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		if args[0] == peerWorkerArg {
			return peer.Run(ctx, args[1:], environ, stdout, stderr)
		}
		if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(stdout, usage)
			config.Usage[settings](stdout)
			return nil
		}
		return usageError{fmt.Errorf("unknown arguments %q; run counterbench -h", args)}
	}
	cfg, err := config.Load[settings](environ)
	if err != nil {
		return usageError{err}
	}
	b, err := newBench(ctx, cfg, environ, stderr)
	if err != nil {
		return err
	}
	rep, runErr := b.run(ctx)
	if err := b.close(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if rep != nil && !rep.Empty() {
		if err := report.Write(cfg.Out, rep); err != nil {
			return errors.Join(runErr, err)
		}
		var paths []string
		for _, f := range rep.Files() {
			paths = append(paths, filepath.Join(cfg.Out, f))
		}
		fmt.Fprintf(stdout, "wrote %s\n", strings.Join(paths, ", "))
	}
	return runErr
}
