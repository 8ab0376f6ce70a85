package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/hotness"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

// Options configure a Server.
type Options struct {
	// Timeout bounds GET, FLUSH and commit acknowledgements when the
	// database is slow or down.
	Timeout time.Duration
	// AckCommit delays each increment's reply until its round is
	// committed in PostgreSQL.
	AckCommit bool
	// Hot classifies keys; nil means no key is ever hot.
	Hot *hotness.Classifier
	// Sample records hot keys' increments probabilistically; otherwise
	// Hot only feeds the HOT command.
	Sample  bool
	Logger  *slog.Logger
	Metrics *metrics.Set
}

// Server serves connections on one listener.
type Server struct {
	buf  *pending.Buffer
	opts Options

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup

	m serverMetrics
}

// New returns a Server that counts into buf.
func New(buf *pending.Buffer, opts Options) *Server {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	s := &Server{buf: buf, opts: opts, conns: map[net.Conn]struct{}{}}
	s.m = newServerMetrics(opts.Metrics, s)
	return s
}

// Listen creates a Unix socket at path with permission mode. A stale socket
// left by a dead daemon is replaced; a live one is an error. The socket is
// created under a umask that already denies what mode denies, so it is
// never briefly more open than asked.
func Listen(path string, mode os.FileMode) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listen %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: another process is serving this socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	old := syscall.Umask(int(^mode & 0o777))
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return ln, nil
}

// Serve accepts connections until ctx ends, then closes the listener, ends
// every connection after the replies to what it already read, and returns
// once all of them are done. Only then may the caller flush and exit.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			// Wake the reader; the connection finishes its batch and exits.
			_ = c.SetReadDeadline(time.Now())
		}
		s.mu.Unlock()
	})
	defer stop()
	var err error
	for {
		var c net.Conn
		c, err = ln.Accept()
		if err != nil {
			break
		}
		s.mu.Lock()
		if ctx.Err() != nil {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(ctx, c)
	}
	s.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("accept: %w", err)
}

// Conns reports how many connections are open.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	if err := s.session(ctx, c); err != nil {
		s.opts.Logger.Debug("connection ended", "err", err)
	}
}

// errQuit ends a session after its replies are written.
var errQuit = errors.New("client quit")

func (s *Server) session(ctx context.Context, c net.Conn) error {
	rd := resp.NewReader(c, 64<<10)
	sess := &session{s: s, out: make([]byte, 0, 64<<10)}
	for {
		var quit error
		for quit == nil {
			args, ok, err := rd.Next()
			if err != nil {
				s.m.protocolErrors.Inc()
				sess.endGroup(ctx)
				sess.out = resp.AppendError(sess.out, "ERR "+err.Error())
				quit = err
				break
			}
			if !ok {
				break
			}
			quit = sess.exec(ctx, args)
		}
		// Increments are acknowledged only after they are journaled, and
		// before their keys, which alias the read buffer, are overwritten.
		sess.endGroup(ctx)
		if out := sess.out; len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return fmt.Errorf("write replies: %w", err)
			}
			sess.out = out[:0]
		}
		if quit != nil {
			return quit
		}
		if err := rd.Fill(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
	}
}
