package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/admin"
	"github.com/counterd/counterd/internal/budget"
	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/database"
	"github.com/counterd/counterd/internal/glob"
	"github.com/counterd/counterd/internal/hotness"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/logging"
	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/privdir"
	"github.com/counterd/counterd/internal/retention"
	"github.com/counterd/counterd/internal/server"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/socket"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/version"
	"github.com/counterd/counterd/internal/windows"
)

// usageError is a bad command line or setting: exit code 2.
type usageError struct{ error }

const usage = `usage: counterd [migrate]

  counterd          apply pending migrations, then serve the socket until SIGTERM
  counterd migrate  apply pending migrations and exit
  counterd --version  print the version and exit

Settings come from the environment:

`

func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	cmd, done, err := config.Command[config.Counterd]("counterd", usage, args, stdout, "serve", "migrate")
	if err != nil {
		return usageError{err}
	}
	if done {
		return nil
	}
	cfg, err := config.Load[config.Counterd](environ)
	if err != nil {
		return usageError{err}
	}
	log := logging.New(stderr, cfg.LogLevel, cfg.LogFormat)
	config.WarnRemoved(log, environ)

	pool, err := database.Open(cfg.DatabaseURL, database.Options{
		MaxConns:         cfg.DBMaxConns,
		StatementTimeout: cfg.StatementTimeout,
		LockTimeout:      cfg.LockTimeout,
	})
	if err != nil {
		return usageError{err} // Open does not connect: a failure is a bad setting
	}
	defer pool.Close()
	if cmd == "migrate" {
		if err := database.Wait(ctx, pool, 10*time.Second); err != nil {
			return err
		}
		b, err := openBackend(ctx, cfg, pool, log)
		if err != nil {
			return err
		}
		defer b.close()
		if err := b.wait(ctx, 10*time.Second); err != nil {
			return err
		}
		return b.migrate(ctx, log)
	}
	return serve(ctx, cfg, log, pool)
}

// migrateTimeout bounds applying the migrations. Each statement is bounded
// by statement_timeout; this is the backstop for a connection that stops
// answering, so it is generous enough for a migration that rewrites a
// table under COUNTERD_STATEMENT_TIMEOUT=0.
const migrateTimeout = 10 * time.Minute

// migrateUp applies pending migrations within migrateTimeout.
func migrateUp(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	_, err := migrate.Up(ctx, pool, log)
	return err
}

// serve runs the daemon. Start-up replays the journal and does not need
// the database; shutdown stops accepting, finishes every connection, then
// flushes everything and closes the journal.
func serve(ctx context.Context, cfg config.Counterd, log *slog.Logger, pool *pgxpool.Pool) error {
	// A fenced journal instance stops the daemon as SIGTERM would, with
	// the fence as the reason.
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	rules, err := parseRules(cfg, log)
	if err != nil {
		return err
	}
	b, err := openBackend(ctx, cfg, pool, log)
	if err != nil {
		return err
	}
	defer b.close()
	set := metrics.NewSet()
	version.Register(set)
	st, err := b.store(rules.storeOptions(cfg), set)
	if err != nil {
		return err
	}
	// The socket is reserved (its directory checked, its lock taken)
	// before the journal directory is touched, so a bad or taken socket
	// path leaves nothing behind.
	reserved, err := socket.Reserve(cfg.Socket)
	if err != nil {
		return settingError(cmp.Or(cfg.SocketSource, "COUNTERD_SOCKET"), err)
	}
	defer reserved.Close() // a no-op once Listen has taken the lock over
	jr, recovered, err := openJournal(cfg, log, set)
	if err != nil {
		return err
	}
	if jr != nil {
		defer jr.Close()
	}

	rounds := recoveredRounds(jr, recovered)
	own := &ownership{cfg: cfg, log: log, pools: b.pools(), jr: jr, rounds: rounds, fail: fail, claimed: make(chan struct{})}
	defer own.stop()
	prepare, err := prepareAtStart(ctx, b, log, own)
	if err != nil {
		return err
	}

	loops := loopsFor(&cfg)
	maxConns, err := connLimit(&cfg, loops, log)
	if err != nil {
		return err
	}
	opts := pending.Options{
		Recovered:        rounds,
		Prepare:          prepare,
		Permanent:        permanent,
		Interval:         cfg.FlushInterval,
		IntervalMax:      cfg.FlushIntervalMax,
		FleetRounds:      cfg.FleetRounds,
		FleetIntervalMax: cfg.FleetIntervalMax,
		MaxKeys:          cfg.FlushMaxKeys,
		RoundTimeout:     cfg.RoundTimeout,
		MaxPendingKeys:   cfg.MaxPendingKeys,
		Shards:           loops,
		Windows:          rules.windows,
		Clock:            rules.clock,
		Logger:           log,
		Metrics:          set,
	}
	if jr != nil {
		opts.Journal = jr // a nil *Journal would be a non-nil interface
		opts.Identity = store.Identity{Instance: jr.InstanceID(), Generation: jr.Generation()}
	}
	buf := pending.New(st, opts)
	own.watchFleet(buf.SetFleet)
	own.watchQueue(buf.QueuedRounds)
	hot := hotness.New(hotness.Options{HotRate: cfg.HotRate, Target: cfg.HotTarget, MaxN: cfg.HotMaxN})
	defer hot.Close()
	budgets := newBudgets(cfg, log, b, jr, buf, lastSeq(rounds), own, set)
	ready := readiness{buf: buf, db: b, jr: jr}
	srv := server.New(buf, server.Options{
		Budgets:         budgets,
		Timeout:         cfg.FlushTimeout,
		Health:          func(ctx context.Context) error { _, err := ready.check(ctx); return err },
		SetMembers:      setMembersOf(st),
		AckCommit:       cfg.Ack == "commit",
		IO:              cfg.IO,
		Loops:           loops,
		Hot:             hot,
		Sample:          rules.sample,
		MaxConns:        maxConns,
		QueryLimit:      cfg.ClientQueryLimit,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Password:        cfg.Password,
		WriteTimeout:    cfg.ClientWriteTimeout,
		OutputLimit:     cfg.ClientOutputLimit,
		Logger:          log,
		Metrics:         set,
	})

	ln, err := reserved.Listen(cfg.SocketMode.FileMode())
	if err != nil {
		return fmt.Errorf("COUNTERD_SOCKET: %w", err)
	}
	defer ln.Close() // Serve closes it on shutdown; this covers early returns
	acc := accepting{srv: srv, buf: buf, jr: jr, maxBytes: cfg.JournalMaxBytes, socket: cfg.Socket}
	if err := serveMetrics(ctx, cfg, set, ready.check, acc.check, log); err != nil {
		ln.Close()
		return err
	}
	r := &running{cfg: cfg, log: log, fail: fail, buf: buf, budgets: budgets, own: own}
	return r.run(ctx, srv, ln, rules.windows)
}

// keyRules are the settings with a grammar of their own, parsed once
// Validate has accepted them.
type keyRules struct {
	windows *windows.Config
	clock   *windows.Clock
	keyTTL  *retention.Rules
	sample  *glob.Matcher
}

// parseRules parses COUNTERD_WINDOWS, COUNTERD_KEY_TTL and
// COUNTERD_SAMPLE_KEYS, and starts the accept clock (pinned by
// COUNTERD_TEST_CLOCK in tests).
func parseRules(cfg config.Counterd, log *slog.Logger) (keyRules, error) {
	var r keyRules
	var err error
	if r.windows, err = windows.Parse(cfg.Windows); err != nil {
		return r, fmt.Errorf("BUG: COUNTERD_WINDOWS passed validation: %w", err)
	}
	r.clock = windows.NewClock(time.Now())
	if !cfg.TestClock.IsZero() {
		r.clock = windows.NewClock(cfg.TestClock)
		log.Warn("accept clock pinned by COUNTERD_TEST_CLOCK (for tests only)", "start", cfg.TestClock)
	}
	if r.keyTTL, err = retention.Parse(cfg.KeyTTL); err != nil {
		return r, fmt.Errorf("BUG: COUNTERD_KEY_TTL passed validation: %w", err)
	}
	if r.sample, err = glob.Parse(cfg.SampleKeys); err != nil {
		return r, fmt.Errorf("BUG: COUNTERD_SAMPLE_KEYS passed validation: %w", err)
	}
	return r, nil
}

// storeOptions are the store's options for these rules.
func (r keyRules) storeOptions(cfg config.Counterd) slots.Options {
	opts := slots.Options{Kinds: catalog.Writers(), Slots: cfg.Slots, Writers: cfg.Writers, Retention: r.windows.Retention}
	if r.keyTTL != nil {
		opts.KeyTTL = r.keyTTL.TTL // nil otherwise: rounds skip the check
	}
	return opts
}

// openJournal opens COUNTERD_JOURNAL_DIR and returns the segments it
// recovered, or nil and a warning with COUNTERD_JOURNAL=false.
func openJournal(cfg config.Counterd, log *slog.Logger, set *metrics.Set) (*journal.Journal, []journal.Segment, error) {
	if !cfg.Journal {
		log.Warn("journal disabled (COUNTERD_JOURNAL=false): a crash loses unflushed increments")
		return nil, nil, nil
	}
	jr, recovered, err := journal.Open(journal.Options{
		Dir: cfg.JournalDir, Fsync: cfg.Fsync, MaxBytes: cfg.JournalMaxBytes, Logger: log, Metrics: set,
	})
	if err != nil {
		return nil, nil, settingError("COUNTERD_JOURNAL_DIR", err)
	}
	log.Info("journal open", "dir", cfg.JournalDir, "instance", jr.InstanceID(), "fsync", cfg.Fsync.String(), "recovered_segments", len(recovered))
	return jr, recovered, nil
}

// prepareAtStart migrates and claims the journal's instance now if the
// database is up, and then returns nil: the flusher need not migrate
// again. Without the database the daemon serves anyway, and the returned
// step lets the flusher do both when it can; a database that refuses the
// connection for good (authentication, no such database) is a bad
// DATABASE_URL, and the daemon does not start. Claiming waits for a live
// owner's lease for up to COUNTERD_OWNER_TTL, so it is bounded by the
// daemon's context (ctx), not a round's.
func prepareAtStart(ctx context.Context, b *backend, log *slog.Logger, own *ownership) (func(context.Context) error, error) {
	prepare := func(pctx context.Context) error {
		if err := b.migrate(pctx, log); err != nil {
			return err
		}
		return own.claim(ctx)
	}
	if err := b.wait(ctx, 2*time.Second); err != nil {
		if database.Permanent(err) {
			// Waiting cannot fix a wrong database, role or password: say
			// so now rather than report ready and journal increments
			// that could never be written.
			return nil, usageError{fmt.Errorf("DATABASE_URL: %w", err)}
		}
		log.Warn("database unreachable at start; accepting increments into the journal until it answers", "err", err)
		return prepare, nil
	}
	return nil, prepare(ctx)
}

// lastSeq is the highest round sequence number replayed from the journal.
func lastSeq(rounds []pending.Recovered) uint64 {
	var last uint64
	for _, r := range rounds {
		last = max(last, r.ID.Seq)
	}
	return last
}

// serveMetrics serves /metrics, /healthz, /readyz and /acceptingz (and
// pprof if asked) on COUNTERD_METRICS_ADDR unless it is off, until ctx
// ends.
func serveMetrics(ctx context.Context, cfg config.Counterd, set *metrics.Set, ready func(context.Context) (string, error), accepting func() error, log *slog.Logger) error {
	if cfg.MetricsAddr == config.MetricsOff {
		return nil
	}
	h := admin.New(admin.Options{Sets: []*metrics.Set{set}, Ready: ready, Accepting: accepting, Profile: cfg.Pprof})
	addr, err := admin.Serve(ctx, cfg.MetricsAddr, h)
	if err != nil {
		return err
	}
	log.Info("serving metrics", "addr", addr.String())
	return nil
}

// readiness answers /readyz.
type readiness struct {
	buf *pending.Buffer
	db  *backend
	jr  *journal.Journal
}

// check fails while rounds fail or the database does not answer, saying
// what is pending; its note counts keys whose total overflowed.
func (r readiness) check(ctx context.Context) (string, error) {
	var note string
	if n := r.buf.Overflowed(); n > 0 {
		note = fmt.Sprintf("; %d keys have a total beyond int64 (see counter_overflows)", n)
	}
	err := withBehind(r.db.behind(), r.buf.Ready())
	if err == nil {
		// No round has failed, but a round's first attempt may
		// still be waiting on an unreachable database (and with
		// nothing queued no round says anything): ask it.
		if perr := r.db.ping(ctx); perr != nil {
			err = fmt.Errorf("database unreachable: %w", perr)
		}
	}
	if err != nil {
		return note, fmt.Errorf("%w; pending: %d rounds, %d keys, %d journal bytes",
			err, r.buf.QueuedRounds(), r.buf.PendingKeys(), journalBytes(r.jr))
	}
	return note, nil
}

// withBehind adds to err, the flusher's reason rounds are not committing
// (nil between attempts), the partitions that hold rounds back: a
// clause of its own, so the text reads as two. (errors.Join put a
// newline between them, which /readyz's reader saw as one sentence: "the
// other partitions commit rounds are not committing".)
func withBehind(behind string, err error) error {
	if behind == "" {
		return err
	}
	if err == nil {
		return fmt.Errorf("behind: %s, while the other partitions commit", behind)
	}
	return fmt.Errorf("behind: %s, while the other partitions commit; %w", behind, err)
}

// running is what runs once the socket listens: the flusher, the
// budgets and the server, stopped in that order's reverse.
type running struct {
	cfg     config.Counterd
	log     *slog.Logger
	fail    context.CancelCauseFunc
	buf     *pending.Buffer
	budgets *budget.Manager
	own     *ownership
}

// run serves ln until ctx ends, then drains: stop accepting, finish every
// connection, flush, return the budgets' leases and release the instance.
func (r *running) run(ctx context.Context, srv *server.Server, ln net.Listener, win *windows.Config) error {
	// The flusher keeps writing while connections drain after SIGTERM,
	// then makes a final flush; COUNTERD_SHUTDOWN_TIMEOUT bounds the whole
	// shutdown from SIGTERM, not each step.
	flushCtx, stopFlusher := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	var flushErr error
	wg.Go(func() { flushErr = r.flush(ctx, flushCtx) })
	var budgetsDone sync.WaitGroup
	budgetsDone.Go(func() { r.budgets.Run(ctx) })

	cfg := r.cfg
	r.log.Info("counterd ready", "socket", cfg.Socket, "ack", cfg.Ack, "io", cfg.IO, "slots", cfg.Slots, "writers", cfg.Writers, "procs", runtime.GOMAXPROCS(0), "flush_interval", cfg.FlushInterval, "flush_interval_max", cfg.FlushIntervalMax, "windows", win.String())
	serveErr := srv.Serve(ctx, ln)
	r.log.Info("stopped accepting; flushing", "pending_keys", r.buf.PendingKeys(), "queued_rounds", r.buf.QueuedRounds())
	stopFlusher()
	wg.Wait()
	budgetsDone.Wait()
	closeBudgets(r.budgets, flushErr == nil, cfg.ShutdownTimeout, r.log)
	if flushErr != nil {
		return fmt.Errorf("%w (they stay in the journal and are written at the next start)", flushErr)
	}
	if cause := context.Cause(ctx); permanent(cause) {
		return cause
	}
	r.own.release()
	r.log.Info("flushed everything; bye")
	return serveErr
}

// flush runs the flusher until flushCtx ends, draining for up to
// COUNTERD_SHUTDOWN_TIMEOUT once ctx has; an error no retry mends stops
// the daemon.
func (r *running) flush(ctx, flushCtx context.Context) error {
	err := r.buf.Run(flushCtx, pending.DrainAfter(ctx, r.cfg.ShutdownTimeout))
	if err != nil && permanent(err) {
		r.fail(err)
	}
	return err
}

// settingError names the variable whose directory failed. A directory
// that is not safe to use (another user could write it or repoint it) is
// a setting or the machine to fix, not a failure to retry: exit code 2,
// as for an invalid value. Other errors (another live daemon holds the
// socket, a disk error) keep exit code 1.
func settingError(name string, err error) error {
	err = fmt.Errorf("%s: %w", name, err)
	if _, ok := errors.AsType[*privdir.Error](err); ok {
		return usageError{err}
	}
	return err
}

// recoveredRounds turns the journal's recovered segments into rounds, each
// with the identity of the run that wrote it.
func recoveredRounds(jr *journal.Journal, segs []journal.Segment) []pending.Recovered {
	var out []pending.Recovered
	for _, seg := range segs {
		if seg.Records == 0 {
			// Nothing to replay; if it cannot go now, the next start tries.
			_ = jr.Remove(seg.Seq)
			continue
		}
		out = append(out, pending.Recovered{ID: segmentID(jr, seg), Changes: seg.Changes})
	}
	return out
}

// segmentID is the identity of the round a segment holds: this journal's
// instance, and the generation of the run that wrote the segment.
func segmentID(jr *journal.Journal, seg journal.Segment) store.BatchID {
	return store.BatchID{Identity: store.Identity{Instance: jr.InstanceID(), Generation: seg.Generation}, Seq: seg.Seq}
}

func journalBytes(jr *journal.Journal) int64 {
	if jr == nil {
		return 0
	}
	return jr.Bytes()
}

// loopsFor is how many event loops serve connections, worked out once so
// the buffer has one accept shard per loop: none for goroutines.
func loopsFor(cfg *config.Counterd) int {
	switch {
	case cfg.IO != server.IOLoop:
		return 0
	case cfg.Loops > 0:
		return cfg.Loops
	}
	return server.DefaultLoops()
}

// setMembersOf is st's lister of exact sets' members (SMEMBERS, SSCAN),
// or nil for a store without one.
func setMembersOf(st store.Store) func(ctx context.Context, key string, after []byte, n int) ([][]byte, error) {
	if l, ok := st.(interface {
		SetMembers(ctx context.Context, key string, after []byte, n int) ([][]byte, error)
	}); ok {
		return l.SetMembers
	}
	return nil
}
