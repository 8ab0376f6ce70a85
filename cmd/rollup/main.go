// Command rollup folds counterd's slot rows into the counters table on a
// cron schedule ("rollup"), or once ("rollup once"). Run "rollup -h" for
// its settings.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/counterd/counterd/internal/migrate"
)

func main() {
	// SIGHUP (the terminal closed, tmux or screen ended the session)
	// stops it as SIGTERM does. SIGPIPE is ignored: a log reader that
	// went away (the tee of make run, a closed terminal) makes a log
	// write fail instead of killing the process before it has drained.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rollup:", err)
		var u usageError
		// A schema this binary does not know: exit 2, as counterd's.
		if errors.As(err, &u) || errors.Is(err, migrate.ErrTooNew) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
