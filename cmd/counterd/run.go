package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/admin"
	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/database"
	"github.com/counterd/counterd/internal/logging"
	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/server"
	"github.com/counterd/counterd/internal/slots"
)

// usageError is a bad command line or setting: exit code 2.
type usageError struct{ error }

const usage = `usage: counterd [migrate]

  counterd          apply pending migrations, then serve the socket until SIGTERM
  counterd migrate  apply pending migrations and exit

Settings come from the environment:

`

func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch {
	case cmd == "-h" || cmd == "--help" || cmd == "help":
		fmt.Fprint(stdout, usage)
		config.Usage[config.Counterd](stdout)
		return nil
	case len(args) > 1 || (cmd != "serve" && cmd != "migrate"):
		return usageError{fmt.Errorf("unknown arguments %q; run counterd -h", args)}
	}
	cfg, err := config.Load[config.Counterd](environ)
	if err != nil {
		return usageError{err}
	}
	log := logging.New(stderr, cfg.LogLevel, cfg.LogFormat)

	pool, err := database.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns, 10*time.Second)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool, log); err != nil {
		return err
	}
	if cmd == "migrate" {
		return nil
	}
	return serve(ctx, cfg, log, pool)
}

// serve runs the daemon. Shutdown order: stop accepting and finish every
// connection, then flush everything, then close the database.
func serve(ctx context.Context, cfg config.Counterd, log *slog.Logger, pool *pgxpool.Pool) error {
	store, err := slots.New(pool, slots.Options{Slots: cfg.Slots})
	if err != nil {
		return err
	}
	set := metrics.NewSet()
	buf := pending.New(store, pending.Options{
		Interval:       cfg.FlushInterval,
		MaxKeys:        cfg.FlushMaxKeys,
		MaxPendingKeys: cfg.MaxPendingKeys,
		Logger:         log,
		Metrics:        set,
	})
	srv := server.New(buf, server.Options{Timeout: cfg.FlushTimeout, Logger: log, Metrics: set})

	ln, err := server.Listen(cfg.Socket, cfg.SocketMode.FileMode())
	if err != nil {
		return err
	}
	if cfg.MetricsAddr != "" {
		addr, _, err := admin.Serve(ctx, cfg.MetricsAddr, admin.Handler([]*metrics.Set{set}, pool.Ping))
		if err != nil {
			ln.Close()
			return err
		}
		log.Info("serving metrics", "addr", addr.String())
	}

	flushCtx, stopFlusher := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	var flushErr error
	wg.Go(func() { flushErr = buf.Run(flushCtx, cfg.ShutdownTimeout) })

	log.Info("counterd ready", "socket", cfg.Socket, "slots", cfg.Slots, "flush_interval", cfg.FlushInterval)
	serveErr := srv.Serve(ctx, ln)
	log.Info("stopped accepting; flushing", "pending_keys", buf.PendingKeys())
	stopFlusher()
	wg.Wait()
	if flushErr != nil {
		return flushErr
	}
	log.Info("flushed everything; bye")
	return serveErr
}
