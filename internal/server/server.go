package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/budget"
	"github.com/counterd/counterd/internal/glob"
	"github.com/counterd/counterd/internal/hotness"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

// Options configure a Server.
type Options struct {
	// Timeout bounds GET, FLUSH and commit acknowledgements when the
	// database is slow or down.
	Timeout time.Duration
	// Health, when set, says what holds rounds back (as /readyz does:
	// failing writes, a partition behind, an unreachable database); a
	// FLUSH that times out adds it to its error.
	Health func(context.Context) error
	// SetMembers, when set, lists up to n members of key's exact set
	// after the member after (nil: from the first), in byte order, as
	// stored: SMEMBERS and SSCAN (kind_member.go) answer from it.
	SetMembers func(ctx context.Context, key string, after []byte, n int) ([][]byte, error)
	// AckCommit delays each increment's reply until its round is
	// committed in PostgreSQL.
	AckCommit bool
	// Hot classifies keys; nil means no key is ever hot.
	Hot *hotness.Classifier
	// Sample names the keys whose increments are recorded
	// probabilistically while hot; nil or empty samples none, and Hot
	// then only feeds the HOT command.
	Sample *glob.Matcher
	// MaxConns is the most connections served at once (default 10000);
	// past it a new connection gets an error reply and is closed.
	MaxConns int
	// ShutdownTimeout bounds how long Serve waits, once its context ends,
	// for connections to answer what they already read; then it closes
	// them (default 30s).
	ShutdownTimeout time.Duration
	// WriteTimeout bounds one write of replies, so a client that stops
	// reading cannot hold its connection forever (default 30s); past it
	// the connection is closed.
	WriteTimeout time.Duration
	// Password, when set, is required (AUTH or HELLO ... AUTH, user
	// "default") before any command but AUTH, HELLO and QUIT.
	Password string
	// QueryLimit is the most bytes one command may take, and so the most
	// a connection's read buffer holds (default resp.MaxCommandBytes);
	// past it the client gets an error and is disconnected, as Redis's
	// client-query-buffer-limit. Before AUTH the bound is far smaller
	// (resp.UnauthenticatedLimits).
	QueryLimit int
	// OutputLimit is the most reply bytes pending for one connection
	// (default 64 MiB); past it the connection is closed, as Redis's
	// client-output-buffer-limit does.
	OutputLimit int
	// IO is how connections are served: "goroutines" (the zero value), one
	// goroutine per connection, or "loop", event loops that journal each
	// pass's increments with one write (loop.go).
	IO string
	// Loops is how many event loops serve connections with IO "loop"
	// (0: DefaultLoops). Each uses the pending.Buffer's Shard of its index.
	Loops int
	// Budgets serves BUDGET, TAKE and NEXT; nil refuses them.
	Budgets *budget.Manager
	Logger  *slog.Logger
	Metrics *metrics.Set
}

// Server serves connections on one listener.
type Server struct {
	buf  *pending.Buffer
	opts Options

	cursors scanCursors // SSCAN's (kind_member.go)

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	nloop int    // connections served by loops; guarded by mu
	loops *loops // set by Serve when Options.IO is "loop"
	// loopHook, when set (tests), runs on each loop, on its goroutine,
	// before it waits.
	loopHook func(*eloop)
	closing  bool // set once Serve's context ends; guarded by mu
	serving  bool // set once Serve accepts; guarded by mu
	wg       sync.WaitGroup

	m   serverMetrics
	out outputMetrics
	reg registry
	// clock is the time expiries are set and read against; tests pin it.
	clock func() time.Time
	// uniques is this daemon's view of unique keys (kind_unique.go).
	uniques uniqueView
	// cmds is the command index (commands). COMMAND's handlers reach it
	// through their server, since the table they are part of cannot name
	// the index built from it (an initialization cycle). Last, so the
	// fields the accept path reads keep their offsets.
	cmds *cmdIndex
}

// New returns a Server that counts into buf.
func New(buf *pending.Buffer, opts Options) *Server {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 10000
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	if opts.QueryLimit <= 0 {
		opts.QueryLimit = resp.MaxCommandBytes
	}
	if opts.OutputLimit <= 0 {
		opts.OutputLimit = 64 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	s := &Server{cmds: &commands, buf: buf, opts: opts, conns: map[net.Conn]struct{}{}, clock: time.Now}
	s.m = newServerMetrics(opts.Metrics, s)
	s.reg.init(time.Now)
	s.out = newOutputMetrics(opts.Metrics)
	return s
}

// Serve accepts connections until ctx ends. Then it stops accepting,
// wakes idle readers, and lets every connection answer the commands it
// already read (with a context that ctx's end does not cancel) before
// closing it. Connections still open ShutdownTimeout after ctx ended are
// closed. Serve returns once every connection is done; only then may the
// caller flush and exit. Accept errors such as running out of file
// descriptors are retried, not returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.reg.setSocket(ln.Addr().String())
	connCtx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	if s.opts.IO == IOLoop {
		ls, err := s.startLoops(connCtx)
		if err != nil {
			return fmt.Errorf("start event loops: %w", err)
		}
		s.mu.Lock()
		s.loops = ls
		s.mu.Unlock()
		defer ls.stop()
	}
	stop := context.AfterFunc(ctx, func() {
		s.opts.Logger.Info("shutting down: stopped accepting; connections answer what they already sent",
			"connections", s.Conns(), "timeout", s.opts.ShutdownTimeout)
		s.shutdown(ln)
	})
	defer stop()

	s.mu.Lock()
	s.serving = true
	s.mu.Unlock()
	err := s.acceptLoop(ctx, connCtx, ln)
	if err != nil {
		s.shutdown(ln) // the listener broke: drain as for a shutdown
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	t := time.NewTimer(s.opts.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.opts.Logger.Warn("closing connections still open after the shutdown timeout",
			"connections", s.Conns(), "timeout", s.opts.ShutdownTimeout)
		hardStop()
		s.closeAll()
		<-done
	}
	return err
}

// shutdown stops accepting and wakes every connection blocked in a read,
// so it answers what it has and ends. It is idempotent.
func (s *Server) shutdown(ln net.Listener) {
	s.mu.Lock()
	s.closing = true
	for c := range s.conns {
		_ = c.SetReadDeadline(time.Now())
	}
	ls := s.loops
	s.mu.Unlock()
	if ls != nil {
		ls.drain()
	}
	ln.Close()
}

// closeAll ends every connection at once, whatever it is doing.
func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
	if s.loops != nil {
		s.loops.closeAll()
	}
}

// draining reports whether Serve is shutting down.
func (s *Server) draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Accepting reports whether Serve accepts connections: an error before
// it has started and once it stopped accepting (shutdown, or a listener
// that broke), saying which.
func (s *Server) Accepting() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return errors.New("stopped accepting connections (shutting down)")
	case !s.serving:
		return errors.New("not accepting connections yet")
	}
	return nil
}

// Conns reports how many connections are open.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) + s.nloop
}

// IO modes (Options.IO).
const (
	IOGoroutines = "goroutines"
	IOLoop       = "loop"
)
