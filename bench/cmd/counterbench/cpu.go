package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
)

// backendPoll is how often a cell looks for counterd's PostgreSQL
// backends: a backend that exits mid-cell loses at most this much CPU
// from the count.
const backendPoll = 200 * time.Millisecond

// cpuMeter reads the CPU a cell costs: the server's process (with any
// child it forks, such as redis-server's AOF rewrite), and for counterd
// the PostgreSQL backends serving its connections and the whole
// PostgreSQL server.
type cpuMeter struct {
	server   int
	serverAt time.Duration
	serverOK bool

	postmaster int
	pgAt       time.Duration
	pgOK       bool

	backends *backendMeter
}

// pgCPU says where a server's PostgreSQL share is: the backends whose
// application_name is app, and the server whose postmaster has pid
// postmaster (0 when its processes cannot be read here).
type pgCPU struct {
	pool       *pgxpool.Pool
	app        string
	postmaster int
}

// startCPU takes the first readings of pid's CPU, unless pid is 0 (no
// server: the sets section's likes pattern), and of pg's unless it is nil
// (redis-server has no database).
func startCPU(ctx context.Context, pid int, pg *pgCPU) *cpuMeter {
	m := &cpuMeter{server: pid}
	if pid > 0 {
		m.serverAt, m.serverOK = tree(pid)
	}
	if pg != nil {
		if m.postmaster = pg.postmaster; m.postmaster != 0 {
			m.pgAt, m.pgOK = tree(m.postmaster)
		}
		m.backends = startBackends(ctx, pg.pool, pg.app)
	}
	return m
}

// finish takes the second readings into row.CPU.
func (m *cpuMeter) finish(ctx context.Context, row *report.Row) {
	if m.serverOK {
		if now, ok := tree(m.server); ok {
			row.CPU.Server = report.Share{Time: now - m.serverAt, Known: true}
		}
	}
	if m.backends != nil {
		row.CPU.PG = m.backends.finish(ctx)
	}
	if m.pgOK {
		if now, ok := tree(m.postmaster); ok {
			row.CPU.PGServer = report.Share{Time: now - m.pgAt, Known: true}
		}
	}
}

func tree(pid int) (time.Duration, bool) {
	t, err := process.Tree(pid)
	return t, err == nil
}

// backendMeter follows the backends whose application_name is app,
// polling pg_stat_activity so that backends opened during the cell count
// too, and remembers each one's first and latest CPU reading.
type backendMeter struct {
	pool *pgxpool.Pool
	app  string
	stop chan struct{}
	done chan struct{}

	mu          sync.Mutex
	first, last map[int]time.Duration
	// unreadable counts backends whose /proc entry was not a
	// PostgreSQL process: the server runs on another machine.
	unreadable int
	err        error
}

func startBackends(ctx context.Context, pool *pgxpool.Pool, app string) *backendMeter {
	m := &backendMeter{pool: pool, app: app, stop: make(chan struct{}), done: make(chan struct{}),
		first: map[int]time.Duration{}, last: map[int]time.Duration{}}
	m.sample(ctx, true)
	go func() {
		defer close(m.done)
		t := time.NewTicker(backendPoll)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				m.sample(ctx, false)
			}
		}
	}()
	return m
}

// sample reads every backend of app. At the start a backend's reading is
// its baseline; one first seen later started during the cell, from zero.
func (m *backendMeter) sample(ctx context.Context, start bool) {
	pids, err := backendPids(ctx, m.pool, m.app)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.err = errors.Join(m.err, err)
		return
	}
	for _, pid := range pids {
		s, err := process.CPUOf(pid)
		if err != nil || !strings.HasPrefix(s.Comm, "postgres") {
			if _, seen := m.first[pid]; !seen {
				m.unreadable++
			}
			continue
		}
		if _, seen := m.first[pid]; !seen {
			if start {
				m.first[pid] = s.Own
			} else {
				m.first[pid] = 0
			}
		}
		m.last[pid] = s.Own
	}
}

func (m *backendMeter) finish(ctx context.Context) report.Share {
	close(m.stop)
	<-m.done
	m.sample(ctx, false)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil || m.unreadable > 0 || len(m.last) == 0 {
		return report.Share{}
	}
	var sum time.Duration
	for pid, t := range m.last {
		sum += t - m.first[pid]
	}
	return report.Share{Time: sum, Known: true}
}

func backendPids(ctx context.Context, pool *pgxpool.Pool, app string) ([]int, error) {
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		return nil, fmt.Errorf("counterd's backends: %w", err)
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			return nil, err
		}
		pids = append(pids, int(pid))
	}
	return pids, rows.Err()
}

// findPostmaster returns the pid of the PostgreSQL server the run uses,
// from postmaster.pid in its data directory, when that directory is on
// this machine and readable; else 0 and why.
func (b *bench) findPostmaster(ctx context.Context) (int, string) {
	var dir string
	if err := b.pool.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dir); err != nil {
		return 0, "cannot read data_directory: " + oneLine(err.Error())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, "the server's postmaster.pid is not readable here: " + oneLine(err.Error())
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, "postmaster.pid does not start with a pid"
	}
	s, err := process.CPUOf(pid)
	if err != nil || !strings.HasPrefix(s.Comm, "postgres") {
		return 0, fmt.Sprintf("process %d is not a PostgreSQL server here", pid)
	}
	return pid, ""
}
