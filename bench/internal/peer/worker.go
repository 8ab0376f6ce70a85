package peer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Lines the worker prints for the process that started it.
const (
	ReadyLine   = "peer worker ready"
	StoppedLine = "peer worker stopped"
)

// moveTimeout bounds one move, also the one under way when the worker is
// told to stop: it finishes rather than leave a half-known state.
const moveTimeout = 5 * time.Minute

// Run is the worker process: it moves the buffer of the redis-server on
// the Unix socket -redis into Table of DATABASE_URL every -interval, and
// at once on SIGUSR1 (the benchmark's final drain). A failed move is
// logged and retried at the next one. Once ctx ends it finishes the move
// under way and prints StoppedLine with its Stats.
func Run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("peer-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("redis", "", "redis-server's Unix socket")
	interval := fs.Duration("interval", time.Second, "time between moves")
	if err := fs.Parse(args); err != nil {
		return err
	}
	url := lookup(environ, "DATABASE_URL")
	if *socket == "" || url == "" || *interval <= 0 {
		return errors.New("peer-worker needs -redis SOCKET, a positive -interval and DATABASE_URL")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: *socket, Protocol: 2, DisableIdentity: true, PoolSize: 1})
	defer rc.Close()
	if err := rc.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("connect to redis-server at %s: %w", *socket, err)
	}
	now := make(chan os.Signal, 1)
	signal.Notify(now, syscall.SIGUSR1)
	defer signal.Stop(now)

	m := &Mover{Buffer: RedisBuffer{C: rc}, Store: PGStore{Conn: conn}}
	fmt.Fprintln(stdout, ReadyLine)
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "%s moves=%d rows=%d increments=%d\n", StoppedLine, m.Stats.Moves, m.Stats.Rows, m.Stats.Increments)
			return nil
		case <-tick.C:
		case <-now:
		}
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), moveTimeout)
		if err := m.Move(mctx); err != nil {
			log.Error("move failed; retrying at the next", "err", err)
		}
		cancel()
	}
}

// ParseStopped reads the Stats from the line Run prints last.
func ParseStopped(line string) (Stats, bool) {
	rest, ok := strings.CutPrefix(line, StoppedLine+" ")
	if !ok {
		return Stats{}, false
	}
	var s Stats
	if _, err := fmt.Sscanf(rest, "moves=%d rows=%d increments=%d", &s.Moves, &s.Rows, &s.Increments); err != nil {
		return Stats{}, false
	}
	return s, true
}

func lookup(environ []string, name string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(environ[i], name+"="); ok {
			return v
		}
	}
	return ""
}
