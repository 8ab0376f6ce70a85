package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
)

// onceWindow is the INCRONCE cells' window: longer than any cell, so
// every repeated visitor of a key is a repeat.
const onceWindow = "24h"

// pfcountScript adds up every key's PFCOUNT inside redis-server.
const pfcountScript = `local s = 0
for _, k in ipairs(redis.call('KEYS', '*')) do s = s + redis.call('PFCOUNT', k) end
return s`

// uniquesCell is one cell of the uniques section: a command sent by
// redis-benchmark to one server.
type uniquesCell struct {
	command string // report.CommandIncr, report.CommandPFAdd or report.OnceCommand
	server  string // report.Counterd, report.RedisPlain or report.RedisEverysec
	keys    string // what the row's keys column says
	// prefix starts every key of the cell, so no cell sees another's
	// members, totals or seen visitors.
	prefix string
	load   benchmarkLoad
	once   bool
}

// uniquesCells are one run's cells: INCR and PFADD to counterd, PFADD to
// both redis-servers, and an INCRONCE cell per repeat share, with the
// ingest section's clients and pipeline.
func (b *bench) uniquesCells(run int) []uniquesCell {
	c := b.cfg
	k := c.UniquesKeys
	load := func(requests, keys int, command ...string) benchmarkLoad {
		return benchmarkLoad{clients: ingestClients, keys: keys, requests: requests, pipeline: 16, command: command}
	}
	prefix := func(i int) string { return fmt.Sprintf("u%d.%d:", run, i) }
	members := fmt.Sprintf("%s keys × %s members", report.Thousands(int64(k)), report.Thousands(int64(k)))
	cells := []uniquesCell{
		{command: report.CommandIncr, server: report.Counterd, keys: report.Thousands(int64(k)) + " keys", prefix: prefix(0)},
		{command: report.CommandPFAdd, server: report.Counterd, keys: members, prefix: prefix(1)},
		{command: report.CommandPFAdd, server: report.RedisPlain, keys: members, prefix: prefix(2)},
		{command: report.CommandPFAdd, server: report.RedisEverysec, keys: members, prefix: prefix(3)},
	}
	for i := range cells {
		x := &cells[i]
		if x.command == report.CommandIncr {
			x.load = load(c.UniquesRequests, k, "incr", x.prefix+"__rand_int__")
		} else {
			x.load = load(c.UniquesRequests, k, "pfadd", x.prefix+"__rand_int__", "m__rand_int__")
		}
	}
	for i, pct := range c.OnceRepeats {
		ok := onceKeys(c.OnceRequests, pct/100)
		x := uniquesCell{command: report.OnceCommand(pct), server: report.Counterd, once: true, prefix: prefix(4 + i),
			keys: fmt.Sprintf("%s keys × %s visitors (expected %.3g%% repeats)", report.Thousands(int64(ok)), report.Thousands(int64(ok)),
				100*repeatShare(c.OnceRequests, ok))}
		x.load = load(c.OnceRequests, ok, "incronce", x.prefix+"__rand_int__", "v__rand_int__", onceWindow)
		cells = append(cells, x)
	}
	return cells
}

// uniquesSection runs every cell UniquesRuns times, each run starting with
// a different cell, as the ingest section does, so no cell always goes
// first after the machine's load changed.
func (b *bench) uniquesSection(ctx context.Context) error {
	tool, lookErr := process.Lookup(b.cfg.RedisBenchmark, "redis-benchmark")
	for run := 1; run <= b.cfg.UniquesRuns; run++ {
		cells := b.uniquesCells(run)
		for i := range cells {
			c := cells[(i+run-1)%len(cells)]
			b.progress.step("uniques %s %s -n %d -r %d (run %d)", c.command, c.server, c.load.requests, c.load.keys, run)
			row := report.Row{
				Section: report.Uniques, Approach: c.server, Command: c.command, Keys: c.keys,
				Clients: c.load.clients, Pipeline: c.load.pipeline, Run: run, RowsWritten: -1, New: -1, SeenRows: -1,
			}
			err := b.uniquesCell(ctx, tool, lookErr, c, &row)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(row, err)
		}
	}
	return nil
}

func (b *bench) uniquesCell(ctx context.Context, tool string, lookErr error, c uniquesCell, row *report.Row) error {
	if benchmarkMissing(lookErr, row) {
		return nil
	}
	if c.server == report.Counterd {
		return b.uniquesCounterd(ctx, tool, c, row)
	}
	srv, why := b.startRedisFlavor(ctx, flavorOf(c.server))
	if srv == nil {
		row.Missing, row.Note = true, why
		return nil
	}
	return srv.aroundCheck(ctx, row, func() error { return b.redisBenchmark(ctx, tool, srv.socket, c.load, row) }, func() error {
		n, err := srv.ctl.Eval(ctx, pfcountScript, nil).Int64()
		if err != nil {
			return fmt.Errorf("sum redis PFCOUNTs: %w", err)
		}
		row.New = n
		return nil
	})
}

// uniquesCounterd measures one cell on counterd (its CPU, PostgreSQL's,
// the slot rows and rounds, all through the final FLUSH) and the WAL the
// server wrote meanwhile, then reads back what the cell stored.
func (b *bench) uniquesCounterd(ctx context.Context, tool string, c uniquesCell, row *report.Row) error {
	srv, err := b.startUniquesCounterd(ctx)
	if err != nil {
		return err
	}
	before, err := srv.scrape(ctx)
	if err != nil {
		return err
	}
	sketchRows, err := b.sketchRowsWritten(ctx)
	if err != nil {
		return err
	}
	lsn, walErr := b.walPosition(ctx)
	after, err := b.counterdAround(ctx, srv, row, func() error { return b.redisBenchmark(ctx, tool, srv.socket, c.load, row) })
	if err != nil {
		return err
	}
	if walErr == nil {
		row.WALBytes, walErr = b.walSince(ctx, lsn)
	}
	if walErr != nil {
		row.Note = "WAL not measured: " + oneLine(walErr.Error())
	}
	// Rounds as the sustain section counts them: one batch-size
	// observation per committed round.
	row.Rounds = int64(after["counterd_flush_batch_keys_count"] - before["counterd_flush_batch_keys_count"])
	switch {
	case c.command == report.CommandPFAdd:
		// Members are not increments: the totals did not move.
		row.Checked = false
		if row.RowsWritten, err = b.stopForSketchRows(ctx, sketchRows); err != nil {
			return err
		}
		row.New, err = b.distinctMembers(ctx, c.prefix, c.load.keys)
	case c.once:
		// counterd_flush_keys_total counts a round's decisions, not
		// the rows they wrote.
		row.Checked, row.New, row.RowsWritten = false, row.Stored, -1
		err = b.pool.QueryRow(ctx, `SELECT count(*) FROM counter_seen WHERE key LIKE $1`, c.prefix+"%").Scan(&row.SeenRows)
		if err != nil {
			err = fmt.Errorf("count seen visitors: %w", err)
		}
	}
	return err
}

// startUniquesCounterd starts the uniques section's own counterd unless
// it runs, printing into counterd-uniques.log; stopForSketchRows stops it
// after every PFADD cell.
func (b *bench) startUniquesCounterd(ctx context.Context) (*counterdServer, error) {
	if b.uniquesD != nil {
		return b.uniquesD, nil
	}
	if b.uniquesLog == nil {
		f, err := b.createLog(report.UniquesLogFile)
		if err != nil {
			return nil, err
		}
		b.uniquesLog = f
	}
	srv, err := b.spawnCounterd(ctx, filepath.Join(b.tmp, "counterd-uniques"), b.uniquesLog)
	if err != nil {
		return nil, err
	}
	b.uniquesD = srv
	return srv, nil
}

// sketchRowsWritten is the rows inserted into or updated in
// counter_unique_slots as far as PostgreSQL's statistics know: a backend
// reports its counts when it exits, and while it lives up to 10 s late.
func (b *bench) sketchRowsWritten(ctx context.Context) (int64, error) {
	var n int64
	err := b.pool.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0)::bigint
		FROM pg_stat_user_tables WHERE relid = to_regclass('counter_unique_slots')`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read counter_unique_slots' statistics: %w", err)
	}
	return n, nil
}

// stopForSketchRows stops the uniques daemon and, once its backends are
// gone (each reports its statistics as it exits), returns the sketch rows
// written since the reading before. counterd's own metrics count a
// round's members, not the sketch rows they became.
func (b *bench) stopForSketchRows(ctx context.Context, before int64) (int64, error) {
	srv := b.uniquesD
	b.uniquesD = nil
	if err := srv.stop(); err != nil {
		return 0, fmt.Errorf("stop counterd: %w", err)
	}
	deadline := time.Now().Add(backendsGoneTimeout)
	for {
		pids, err := backendPids(ctx, b.pool, srv.app)
		if err != nil {
			return 0, err
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("counterd's %d backends were still there %v after it stopped", len(pids), backendsGoneTimeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(backendPoll / 10):
		}
	}
	after, err := b.sketchRowsWritten(ctx)
	return after - before, err
}

// backendsGoneTimeout bounds the wait for a stopped counterd's backends to
// exit.
const backendsGoneTimeout = 30 * time.Second

// distinctMembers sums counter_uniques over the keys redis-benchmark drew:
// prefix and every 12-digit number below keys.
func (b *bench) distinctMembers(ctx context.Context, prefix string, keys int) (int64, error) {
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("%s%012d", prefix, i)
	}
	var n int64
	if err := b.pool.QueryRow(ctx, `SELECT round(coalesce(sum(estimate), 0))::bigint FROM counter_uniques($1)`, names).Scan(&n); err != nil {
		return 0, fmt.Errorf("sum counter_uniques: %w", err)
	}
	return n, nil
}

// walPosition is the server's current WAL insert position.
func (b *bench) walPosition(ctx context.Context) (string, error) {
	var lsn string
	if err := b.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		return "", fmt.Errorf("read the WAL position: %w", err)
	}
	return lsn, nil
}

// walSince is the WAL the server wrote since lsn, in bytes.
func (b *bench) walSince(ctx context.Context, lsn string) (int64, error) {
	var n int64
	if err := b.pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, lsn).Scan(&n); err != nil {
		return 0, fmt.Errorf("read the WAL position: %w", err)
	}
	return n, nil
}

// repeatShare is the expected share of repeats among n requests that
// each draw a key and a visitor uniformly below k, independently (as
// redis-benchmark draws every __rand_int__): a request is a repeat when
// its pair was drawn before, and n draws from k² pairs leave
// k²·(1−(1−1/k²)ⁿ) distinct ones.
func repeatShare(n, k int) float64 {
	if n <= 0 || k <= 0 {
		return 0
	}
	pairs := float64(k) * float64(k)
	distinct := -pairs * math.Expm1(float64(n)*math.Log1p(-1/pairs))
	return 1 - distinct/float64(n)
}

// onceKeys is the k for which n requests drawing a key and a visitor below
// k repeat the share closest to repeat (0 < repeat < 1). repeatShare
// falls as k grows, so a bisection finds it.
func onceKeys(n int, repeat float64) int {
	lo, hi := 1, 1<<31-1 // repeatShare(n, lo) >= repeat > repeatShare(n, hi), as far as they can be
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if repeatShare(n, mid) >= repeat {
			lo = mid
		} else {
			hi = mid
		}
	}
	if math.Abs(repeatShare(n, lo)-repeat) <= math.Abs(repeatShare(n, hi)-repeat) {
		return lo
	}
	return hi
}
