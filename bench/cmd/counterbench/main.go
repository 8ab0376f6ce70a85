// Command counterbench measures the ways of counting into PostgreSQL side
// by side: the patterns an application can use on its own (naive
// read-then-write, atomic UPDATE, SELECT FOR UPDATE, slotted upserts, SKIP
// LOCKED slots, probabilistic increments), counterd over its socket, and
// redis-server for reference, at several concurrencies and key
// distributions; then PostgreSQL's multi-row upsert ceiling, a
// redis-benchmark ingest run (which also measures the Redis-buffer-plus-
// worker pattern; its worker is this command, run by the benchmark as
// "counterbench peer-worker"), latency at an offered rate and a sustained
// load on counterd that watches whether PostgreSQL keeps up. The uniques
// section runs PFADD beside INCR and redis-server's PFADD, and INCRONCE
// with few and many repeated visitors. Two more sections reproduce issue
// 13's seeds: bounded budgets spent by SQL alone and by counterd's TAKE
// from one and two daemons (seed 000), and one owner's tickets drawn
// concurrently (seed 004). The sets section runs exact sets' SADD (new
// members and repeats) beside INCR, redis-server's SADD and the
// application's own likes pattern in SQL. It writes bench.md, bench.csv
// and bench.png,
// sustain.png and sustain.csv for the sustained load, budgets.csv for the
// budget and tickets cells, and counterd.log, counterd-uniques.log,
// counterd-budget.log, redis-server.log and peer-worker.log with
// everything the servers printed. Run "counterbench -h" for its settings; "make bench" provides
// PostgreSQL and redis-server.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "counterbench:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
