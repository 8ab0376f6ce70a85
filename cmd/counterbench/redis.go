package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/bench/loadgen"
	"github.com/counterd/counterd/internal/bench/process"
	"github.com/counterd/counterd/internal/bench/report"
	"github.com/redis/go-redis/v9"
)

// redisServer is the redis-server process the run started.
type redisServer struct {
	proc   *process.Process
	socket string
	ctl    *redis.Client
	// log receives all of redis-server's output; closed once it stopped.
	log *os.File
}

// sumScript adds up every key's value inside redis-server, so checking a
// total costs one round trip.
const sumScript = `local s = 0
for _, k in ipairs(redis.call('KEYS', '*')) do s = s + tonumber(redis.call('GET', k)) end
return s`

// startRedis starts redis-server on the first call. When it cannot, it
// returns nil and remembers why in b.redisAbsent.
func (b *bench) startRedis(ctx context.Context) *redisServer {
	if b.redis != nil || b.redisAbsent != "" {
		return b.redis
	}
	path, err := process.Lookup(b.cfg.RedisServer, "redis-server")
	if err != nil {
		b.redisAbsent = err.Error() + "; install redis-server (make bench does when it can) or set COUNTERBENCH_REDIS_SERVER"
		return nil
	}
	dir := filepath.Join(b.tmp, "redis")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.redisAbsent = err.Error()
		return nil
	}
	socket := filepath.Join(dir, "r.sock")
	log, err := b.createLog(report.RedisLogFile)
	if err != nil {
		b.redisAbsent = err.Error()
		return nil
	}
	b.progress.note("starting redis-server (" + path + ")")
	proc, err := process.Start(ctx, process.Spec{
		Name: "redis-server", Path: path, Dir: dir, Timeout: 30 * time.Second, Log: log,
		Args: []string{"--port", "0", "--unixsocket", socket, "--unixsocketperm", "700",
			"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no"},
		Ready: func(line string) bool { return strings.Contains(strings.ToLower(line), "ready to accept connections") },
	})
	if err != nil {
		log.Close()
		b.redisAbsent = "redis-server did not start: " + oneLine(err.Error())
		return nil
	}
	b.redis = &redisServer{proc: proc, socket: socket, ctl: control(socket), log: log}
	b.progress.note(fmt.Sprintf("redis-server ready (pid %d)", proc.Pid()))
	return b.redis
}

func (r *redisServer) stop() error {
	r.ctl.Close()
	err := r.proc.Stop(30 * time.Second)
	return errors.Join(err, r.log.Close())
}

// redisMeasure empties redis-server, runs load against it into row and
// checks that the values add up to the increments acknowledged.
func (b *bench) redisMeasure(ctx context.Context, row *report.Row, load loadgen.Config) error {
	srv := b.startRedis(ctx)
	if srv == nil {
		row.Missing, row.Note = true, b.redisAbsent
		return nil
	}
	load.Network, load.Addr = "unix", srv.socket
	return srv.around(ctx, row, func() error {
		res, err := loadgen.Run(ctx, load)
		if err != nil {
			return err
		}
		fillFromLoad(row, res)
		return nil
	})
}

// around empties the server, runs measure and reads the total back.
func (r *redisServer) around(ctx context.Context, row *report.Row, measure func() error) error {
	if err := r.ctl.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	if err := measure(); err != nil {
		return err
	}
	sum, err := r.ctl.Eval(ctx, sumScript, nil).Int64()
	if err != nil {
		return fmt.Errorf("sum redis values: %w", err)
	}
	row.Checked, row.Stored, row.RowsWritten = true, sum, -1
	return nil
}
