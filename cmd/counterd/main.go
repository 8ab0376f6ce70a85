// Command counterd is the counting sidecar: it accepts Redis-protocol
// increments on a Unix socket and writes them to PostgreSQL as slotted
// upserts. Run "counterd -h" for its settings.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/server"
)

func main() {
	server.Oversubscribe(os.Getenv("GOMAXPROCS"))
	// SIGHUP (the terminal closed, tmux or screen ended the session)
	// stops it as SIGTERM does. SIGPIPE is ignored: a log reader that
	// went away (the tee of make run, a closed terminal) makes a log
	// write fail instead of killing the process before it has drained.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "counterd:", err)
		var u usageError
		// A schema this binary does not know is a version to change,
		// not a failure to retry: exit 2, as a bad setting.
		if errors.As(err, &u) || errors.Is(err, migrate.ErrTooNew) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
