package server

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/pending"
)

// fakeListener hands out whatever the test sends on next: a net.Conn or
// an error; Close makes Accept return net.ErrClosed.
type fakeListener struct {
	next   chan any
	closed chan struct{}
	once   atomic.Bool
}

func newFakeListener() *fakeListener {
	return &fakeListener{next: make(chan any), closed: make(chan struct{})}
}

func (l *fakeListener) Accept() (net.Conn, error) {
	select {
	case v := <-l.next:
		if err, ok := v.(error); ok {
			return nil, err
		}
		return v.(net.Conn), nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *fakeListener) Close() error {
	if l.once.CompareAndSwap(false, true) {
		close(l.closed)
	}
	return nil
}

func (l *fakeListener) Addr() net.Addr { return &net.UnixAddr{Name: "fake", Net: "unix"} }

// dial hands the server one end of a pipe and returns the other.
func (l *fakeListener) dial(t *testing.T) net.Conn {
	t.Helper()
	srv, cli := net.Pipe()
	l.next <- srv
	t.Cleanup(func() { cli.Close() })
	return cli
}

// served is a Serve call running in the background.
type served struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Serve returns
	err    error         // what Serve returned, once done is closed
}

// serve runs s on ln until the test ends, then checks Serve returned.
func serve(t *testing.T, s *Server, ln net.Listener) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &served{cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = s.Serve(ctx, ln)
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return within 30s of its context ending")
		}
	})
	return r
}

func roundTrip(t *testing.T, c net.Conn, cmd, want string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		t.Fatalf("write %q: %v", cmd, err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != want {
		t.Fatalf("%q: got %q, %v; want %q", cmd, line, err, want)
	}
}

// Running out of file descriptors (or memory, or an aborted connection)
// makes Accept fail for a while; the server retries rather than exiting.
func TestAcceptErrorsRetried(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	s := New(pending.New(nil, pending.Options{}), Options{Metrics: set})
	ln := newFakeListener()
	r := serve(t, s, ln)
	errs := []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED}
	for _, err := range errs {
		select {
		case ln.next <- &net.OpError{Op: "accept", Net: "unix", Err: err}:
		case <-r.done:
			t.Fatalf("Serve returned %v after an accept error; want it to retry", r.err)
		}
	}
	roundTrip(t, ln.dial(t), "PING\r\n", "+PONG\r\n")
	var b strings.Builder
	set.WritePrometheus(&b)
	if !strings.Contains(b.String(), "counterd_accept_errors_total 5\n") {
		t.Fatalf("metrics lack counterd_accept_errors_total 5:\n%s", b.String())
	}
}

func TestMaxConns(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	s := New(pending.New(nil, pending.Options{}), Options{MaxConns: 2, Metrics: set})
	ln := newFakeListener()
	serve(t, s, ln)
	a, b := ln.dial(t), ln.dial(t)
	roundTrip(t, a, "PING\r\n", "+PONG\r\n")
	roundTrip(t, b, "PING\r\n", "+PONG\r\n")
	c := ln.dial(t)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(c)
	if line, err := rd.ReadString('\n'); err != nil || line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third connection: got %q, %v; want -ERR max number of clients reached", line, err)
	}
	if _, err := rd.ReadByte(); err == nil {
		t.Fatal("third connection: still open; want it closed")
	}
	roundTrip(t, a, "PING\r\n", "+PONG\r\n") // the admitted ones are unaffected
	var m strings.Builder
	set.WritePrometheus(&m)
	if !strings.Contains(m.String(), "counterd_connections_refused_total 1\n") {
		t.Fatalf("metrics lack counterd_connections_refused_total 1:\n%s", m.String())
	}
}

// A client that sends commands and never reads the replies blocks the
// server's write; shutdown must still end within ShutdownTimeout.
func TestShutdownBoundsNonReader(t *testing.T) {
	t.Parallel()
	s := New(pending.New(nil, pending.Options{}), Options{ShutdownTimeout: 200 * time.Millisecond})
	ln := newFakeListener()
	r := serve(t, s, ln)
	c := ln.dial(t)
	// net.Pipe has no buffer: the reply write blocks until the client
	// reads, which it never does. Write returns once the server has read.
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Fatalf("Serve: %v", r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve still running 20s after shutdown with a 200ms bound")
	}
}

// Replies are written once they pass maxPendingOut, before the rest of a
// large pipeline is read: the client gets replies while its own write of
// the pipeline is still blocked, and the server never holds the replies
// to the whole pipeline.
func TestRepliesWrittenBeforeReadingMore(t *testing.T) {
	t.Parallel()
	s := New(pending.New(nil, pending.Options{}), Options{})
	ln := newFakeListener()
	serve(t, s, ln)
	c := ln.dial(t)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	// Each command is ~2 KB and its reply ~13 KB.
	cmd := "CONFIG GET" + strings.Repeat(" a", 1000) + "\r\n"
	const n = 32
	var written atomic.Bool
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte(strings.Repeat(cmd, n)))
		written.Store(true)
		wrote <- err
	}()
	rd := bufio.NewReader(c)
	if _, err := rd.Peek(1); err != nil {
		t.Fatal(err)
	}
	if written.Load() {
		t.Fatal("the server read the whole pipeline before writing any reply; want replies written past 64 KiB")
	}
	want := "*2000\r\n" + strings.Repeat("$1\r\na\r\n$0\r\n\r\n", 1000)
	buf := make([]byte, len(want))
	for i := range n {
		if _, err := readFull(rd, buf); err != nil || string(buf) != want {
			t.Fatalf("reply %d: %v (got %.40q...)", i, err, buf)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

func readFull(rd *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := rd.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
