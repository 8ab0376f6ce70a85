package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/loadgen"
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

// redisFlavor is one way of running redis-server: the matrix, latency
// and tickets sections use the one that keeps nothing; the ingest section
// also the one with an append-only file fsynced every second.
type redisFlavor struct {
	name, dir, log string
	args           []string
}

var (
	redisPlain = redisFlavor{name: report.RedisPlain, dir: "redis", log: report.RedisLogFile,
		args: []string{"--save", "", "--appendonly", "no"}}
	// redis-server's defaults otherwise, the AOF rewrite that forks once
	// the file has doubled included: its CPU counts too.
	redisEverysec = redisFlavor{name: report.RedisEverysec, dir: "redis-everysec", log: report.RedisAOFLogFile,
		args: []string{"--save", "", "--appendonly", "yes", "--appendfsync", "everysec"}}
)

// flavorOf is the redis-server flavor a row names: appendfsync everysec,
// or else the one keeping nothing.
func flavorOf(server string) redisFlavor {
	if server == report.RedisEverysec {
		return redisEverysec
	}
	return redisPlain
}

// startRedis starts the redis-server that keeps nothing on the first
// call. When it cannot, it returns nil and remembers why in
// b.redisAbsent.
func (b *bench) startRedis(ctx context.Context) *redisServer {
	srv, why := b.startRedisFlavor(ctx, redisPlain)
	if srv == nil {
		b.redisAbsent = why
	}
	return srv
}

// startRedisFlavor starts f's redis-server on the first call and returns
// it after; nil and why when it cannot, every time.
func (b *bench) startRedisFlavor(ctx context.Context, f redisFlavor) (*redisServer, string) {
	if b.redises == nil {
		b.redises, b.redisWhy = map[string]*redisServer{}, map[string]string{}
	}
	if srv := b.redises[f.name]; srv != nil || b.redisWhy[f.name] != "" {
		return srv, b.redisWhy[f.name]
	}
	srv, err := b.spawnRedis(ctx, f)
	if err != nil {
		b.redisWhy[f.name] = err.Error()
		return nil, err.Error()
	}
	b.redises[f.name] = srv
	return srv, ""
}

func (b *bench) spawnRedis(ctx context.Context, f redisFlavor) (*redisServer, error) {
	path, err := process.Lookup(b.cfg.RedisServer, "redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w; install redis-server (make bench does when it can) or set COUNTERBENCH_REDIS_SERVER", err)
	}
	dir := filepath.Join(b.tmp, f.dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	socket := filepath.Join(dir, "r.sock")
	log, err := b.createLog(f.log)
	if err != nil {
		return nil, err
	}
	b.progress.note("starting " + f.name + " (" + path + ")")
	proc, err := process.Start(ctx, process.Spec{
		Name: f.name, Path: path, Dir: dir, Timeout: 30 * time.Second, Log: log,
		Args: append([]string{"--port", "0", "--unixsocket", socket, "--unixsocketperm", "700",
			"--dir", dir, "--daemonize", "no"}, f.args...),
		Ready: func(line string) bool { return strings.Contains(strings.ToLower(line), "ready to accept connections") },
	})
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("%s did not start: %s", f.name, oneLine(err.Error()))
	}
	b.progress.note(fmt.Sprintf("%s ready (pid %d)", f.name, proc.Pid()))
	return &redisServer{proc: proc, socket: socket, ctl: control(socket), log: log}, nil
}

func (r *redisServer) stop() error {
	r.ctl.Close()
	err := r.proc.Stop(30 * time.Second)
	return errors.Join(err, r.log.Close())
}

// redisMeasure empties redis-server, runs load against it into row and
// checks that the values add up to the increments acknowledged.
func (b *bench) redisMeasure(ctx context.Context, row *report.Row, load loadgen.Config) error {
	return b.redisMeasureOn(ctx, redisPlain, row, load)
}

// redisMeasureOn is redisMeasure on f's redis-server.
func (b *bench) redisMeasureOn(ctx context.Context, f redisFlavor, row *report.Row, load loadgen.Config) error {
	srv, why := b.startRedisFlavor(ctx, f)
	if srv == nil {
		row.Missing, row.Note = true, why
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

// around empties the server, runs measure, with the server's CPU read
// before and after it, and reads the total back.
func (r *redisServer) around(ctx context.Context, row *report.Row, measure func() error) error {
	return r.aroundCheck(ctx, row, measure, func() error {
		sum, err := r.ctl.Eval(ctx, sumScript, nil).Int64()
		if err != nil {
			return fmt.Errorf("sum redis values: %w", err)
		}
		row.Checked, row.Stored, row.RowsWritten = true, sum, -1
		return nil
	})
}

// aroundCheck is around with check reading the result back instead.
func (r *redisServer) aroundCheck(ctx context.Context, row *report.Row, measure, check func() error) error {
	if err := r.ctl.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	cpu := startCPU(ctx, r.proc.Pid(), nil)
	if err := measure(); err != nil {
		return err
	}
	cpu.finish(ctx, row)
	return check()
}
