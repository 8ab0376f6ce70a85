package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/bench/internal/peer"
	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
)

// peerWorkerArg makes counterbench the peer's worker: the run starts its
// own executable with it for every peer cell, so the worker is a process
// of its own whose CPU /proc reads apart from the harness's.
const peerWorkerArg = "peer-worker"

// peerWorkerApp is the application_name of the worker's connection, which
// finds its backend in pg_stat_activity.
const peerWorkerApp = "counterbench-peer-worker"

const (
	// peerDrainTimeout bounds the wait for the worker to move what the
	// load left; a worker that keeps failing fails the cell then.
	peerDrainTimeout = 5 * time.Minute
	// peerDrainPoll is how often the drain asks redis-server whether the
	// buffer is empty: a small share of the drain's time, and one EXISTS
	// per poll on redis-server's CPU.
	peerDrainPoll = 2 * time.Millisecond
)

// peerLoad is the ingest load for the peer: the same clients, keys and
// requests, each an HINCRBY into the buffer hash.
func (b *bench) peerLoad(pipeline int) benchmarkLoad {
	l := b.ingestLoad(pipeline)
	l.command = []string{"hincrby", peer.Hash, "post:__rand_int__", "1"}
	return l
}

// peerCell measures the Redis-buffer-plus-worker pattern: redis-server
// with appendfsync everysec (the ingest section's), a worker started for
// the cell, redis-benchmark's HINCRBYs, then the drain: the worker moves
// the rest at once, and the cell waits until the buffer is empty. CPU is
// redis-server's, the worker's and the worker's backends', read before
// the load and after the drain; the stored total is the growth of the
// worker's table.
func (b *bench) peerCell(ctx context.Context, tool string, row *report.Row) error {
	srv, why := b.startRedisFlavor(ctx, redisEverysec)
	if srv == nil {
		row.Missing, row.Note = true, why
		return nil
	}
	if err := peer.CreateTable(ctx, b.pool); err != nil {
		return fmt.Errorf("create %s: %w", peer.Table, err)
	}
	if err := srv.ctl.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	before, err := peer.Total(ctx, b.pool)
	if err != nil {
		return fmt.Errorf("sum %s: %w", peer.Table, err)
	}
	w, err := b.startPeerWorker(ctx, srv.socket, b.url)
	if err != nil {
		return err
	}
	cpu := startCPU(ctx, srv.proc.Pid(), &pgCPU{pool: b.pool, app: peerWorkerApp, postmaster: b.postmaster})
	workerAt, workerOK := tree(w.Pid())
	err = b.redisBenchmark(ctx, tool, srv.socket, b.peerLoad(row.Pipeline), row)
	if err == nil {
		row.Drain, err = drainPeer(ctx, srv.ctl, w)
	}
	cpu.finish(ctx, row)
	if now, ok := tree(w.Pid()); ok && workerOK {
		row.CPU.Worker = report.Share{Time: now - workerAt, Known: true}
	}
	if stopErr := w.Stop(time.Minute); err != nil || stopErr != nil {
		return errors.Join(err, stopErr)
	}
	after, err := peer.Total(ctx, b.pool)
	if err != nil {
		return fmt.Errorf("sum %s: %w", peer.Table, err)
	}
	row.Checked, row.Stored = true, after-before
	// The worker's last line says how many rows it upserted.
	if line, ok := w.Find(func(line string) (string, bool) {
		_, ok := peer.ParseStopped(line)
		return line, ok
	}); ok {
		s, _ := peer.ParseStopped(line)
		row.RowsWritten = s.Rows
	}
	return nil
}

// startPeerWorker starts the worker on redis-server's socket and the
// database dbURL names (with the run's schema), logging into the run's
// peer-worker.log.
func (b *bench) startPeerWorker(ctx context.Context, socket, dbURL string) (*process.Process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find counterbench's executable for the peer's worker: %w", err)
	}
	url, err := withParam(dbURL, "application_name", peerWorkerApp)
	if err != nil {
		return nil, err
	}
	if b.peerLog == nil {
		if b.peerLog, err = b.createLog(report.PeerWorkerLogFile); err != nil {
			return nil, err
		}
	}
	return process.Start(ctx, process.Spec{
		Name: "peer worker", Path: self, Args: []string{peerWorkerArg, "-redis", socket},
		Env: []string{"DATABASE_URL=" + url}, Timeout: time.Minute, Log: b.peerLog,
		Ready: func(line string) bool { return line == peer.ReadyLine },
	})
}

// drainPeer tells the worker to move the buffer now and waits until
// neither the buffer hash nor a renamed one is left. The load has ended,
// so nothing refills it: once both are gone, every increment is
// committed (the worker deletes a renamed hash only after its upsert
// commits).
func drainPeer(ctx context.Context, ctl *redis.Client, w *process.Process) (time.Duration, error) {
	start := time.Now()
	p, err := os.FindProcess(w.Pid())
	if err == nil {
		err = p.Signal(syscall.SIGUSR1)
	}
	if err != nil {
		return 0, fmt.Errorf("tell the peer's worker to drain: %w", err)
	}
	deadline := time.NewTimer(peerDrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(peerDrainPoll)
	defer tick.Stop()
	for {
		n, err := ctl.Exists(ctx, peer.Hash, peer.Moving).Result()
		if err != nil {
			return 0, fmt.Errorf("drain: EXISTS: %w", err)
		}
		if n == 0 {
			return time.Since(start), nil
		}
		select {
		case <-tick.C:
		case <-w.Exited():
			return 0, fmt.Errorf("the peer's worker exited during the drain:\n%s", w.Output())
		case <-deadline.C:
			return 0, fmt.Errorf("the peer's worker left the buffer unmoved %v after the load:\n%s", peerDrainTimeout, w.Output())
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
