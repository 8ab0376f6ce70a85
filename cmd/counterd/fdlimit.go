package main

import (
	"fmt"
	"log/slog"

	"syscall"

	"github.com/counterd/counterd/internal/config"
)

// Descriptors kept out of the connection limit, so that clients can never
// take the ones the journal and PostgreSQL need: with none left, every
// round fails to cut (a new segment cannot be opened) or to write while
// clients are still acknowledged. Redis keeps 32 (CONFIG_MIN_RESERVED_FDS)
// for the same reason.
const (
	// reservedProcess: stdin/out/err, the Go runtime's poller and cgroup
	// files, the socket and its lock, the metrics listener.
	reservedProcess = 16
	// reservedJournal: its LOCK, a directory opened to fsync, the current,
	// spare and sealed segments and the committed ones kept for reuse.
	reservedJournal = 16
	// reservedAdmin: metrics scrapes and /readyz probes at once.
	reservedAdmin = 8
	// perLoop: an event loop's epoll instance and eventfd, and the
	// moment an accepted connection is held twice while the loop takes
	// its own copy.
	perLoop = 3
)

// reservedFDs is how many descriptors the daemon needs besides its
// clients' connections.
func reservedFDs(cfg *config.Counterd, loops int) int {
	return reservedProcess + reservedJournal + reservedAdmin + cfg.DBMaxConns + perLoop*loops + 1 // +1: refusing one connection
}

// connLimit raises the soft open-file limit to the hard one, as Redis does,
// and returns COUNTERD_MAX_CONNS capped so that the reserved descriptors
// stay free, logging why when it caps. It fails when the limit leaves no
// descriptor for clients at all.
func connLimit(cfg *config.Counterd, loops int, log *slog.Logger) (int, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the open file limit: %w", err)
	}
	raised := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
	adjustFileLimit(&raised)
	if lim.Cur < raised.Cur {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("cannot raise the open file limit to its hard limit", "soft", lim.Cur, "hard", lim.Max, "err", err)
		} else {
			lim = raised
		}
	}
	reserved := reservedFDs(cfg, loops)
	limit := int(min(lim.Cur, 1<<30))
	room := limit - reserved
	if room < 1 {
		return 0, fmt.Errorf("the open file limit (ulimit -n) of %d leaves no descriptor for clients: counterd keeps %d for the journal, "+
			"PostgreSQL (COUNTERD_DB_MAX_CONNS=%d) and itself; raise the limit to at least %d",
			limit, reserved, cfg.DBMaxConns, reserved+cfg.MaxConns)
	}
	if room < cfg.MaxConns {
		log.Warn("COUNTERD_MAX_CONNS lowered to fit the open file limit; raise the limit (ulimit -n, systemd LimitNOFILE) to serve more",
			"max_conns", room, "requested", cfg.MaxConns, "open_file_limit", limit, "reserved", reserved, "db_max_conns", cfg.DBMaxConns)
		return room, nil
	}
	log.Info("connection limit", "max_conns", cfg.MaxConns, "open_file_limit", limit, "reserved", reserved)
	return cfg.MaxConns, nil
}
