package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/store"
)

// ioModes are the Options.IO modes this system serves.
var ioModes = []string{IOGoroutines, IOLoop}

// loopServer serves buf in loop mode on a real Unix socket.
func loopServer(t *testing.T, buf *pending.Buffer, opts Options, hook func()) string {
	t.Helper()
	opts.IO = IOLoop
	s := New(buf, opts)
	if hook != nil {
		s.loopHook = func(*eloop) { hook() }
		s.opts.Loops = 1 // the hook parks the one loop
	}
	return serveUnix(t, s)
}

// gateStore is emptyStore whose reads wait for release.
type gateStore struct {
	emptyStore
	reading chan struct{}
	release chan struct{}
}

func (g gateStore) Read(ctx context.Context, keys []string, ids []store.Identity) (store.Snapshot, error) {
	g.reading <- struct{}{}
	<-g.release
	return g.emptyStore.Read(ctx, keys, ids)
}

func TestLoopPipelineOrder(t *testing.T) {
	t.Parallel()
	path := loopServer(t, pending.New(emptyStore{}, pending.Options{}), Options{}, nil)
	c := dialLoop(t, path)
	c.send("PING\r\n")
	c.expect("+PONG\r\n")
	c.send("INCR a\r\nINCR a\r\nGET a\r\nINCRBY a 5\r\nMULTI\r\nINCR a\r\nGET a\r\nEXEC\r\nPING\r\nINCR\r\n")
	c.expect(":1\r\n", ":1\r\n", "$1\r\n", "2\r\n", ":5\r\n", "+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n",
		"*2\r\n", ":1\r\n", "$1\r\n", "8\r\n", "+PONG\r\n", "-ERR wrong number of arguments for 'incr' command\r\n")
	c.send("QUIT\r\n")
	c.expect("+OK\r\n")
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Fatal("connection still open after QUIT")
	}
}

// The increments of many connections read in one pass are one journal
// append.
func TestLoopOnePassOneAppend(t *testing.T) {
	t.Parallel()
	jr := openCounting(t)
	var armed atomic.Bool
	parked, release := make(chan struct{}), make(chan struct{})
	hook := func() {
		if armed.CompareAndSwap(true, false) {
			parked <- struct{}{}
			<-release
		}
	}
	path := loopServer(t, pending.New(emptyStore{}, pending.Options{Journal: jr}), Options{}, hook)
	const n = 20
	cs := make([]*loopClient, n)
	for i := range cs {
		cs[i] = dialLoop(t, path)
		cs[i].send("PING\r\n")
		cs[i].expect("+PONG\r\n")
	}
	waker := dialLoop(t, path)
	armed.Store(true)
	waker.send("PING\r\n") // wake the loop, so that it parks before its next wait
	<-parked
	before := jr.appends.Load()
	for i, c := range cs {
		c.send(fmt.Sprintf("INCR k%d\r\nINCRBY k 2\r\n", i))
	}
	close(release)
	waker.expect("+PONG\r\n")
	for _, c := range cs {
		c.expect(":1\r\n", ":2\r\n")
	}
	if got := jr.appends.Load() - before; got != 1 {
		t.Fatalf("journal appends for %d connections' increments read in one pass: got %d; want 1", n, got)
	}
}

// A GET waiting on the database holds up neither other connections nor
// the order of its own connection's replies.
func TestLoopBlockingCommand(t *testing.T) {
	t.Parallel()
	g := gateStore{reading: make(chan struct{}), release: make(chan struct{})}
	path := loopServer(t, pending.New(g, pending.Options{}), Options{}, nil)
	a, b := dialLoop(t, path), dialLoop(t, path)
	a.send("INCR k\r\nGET k\r\nINCR k\r\nPING\r\n")
	<-g.reading
	for range 3 {
		b.send("INCR other\r\n")
		b.expect(":1\r\n")
	}
	close(g.release)
	a.expect(":1\r\n", "$1\r\n", "1\r\n", ":1\r\n", "+PONG\r\n")
}

// A client that pipelines without reading is paused at the output limit;
// others are served meanwhile.
func TestLoopNonReaderDoesNotStall(t *testing.T) {
	t.Parallel()
	path := loopServer(t, pending.New(emptyStore{}, pending.Options{}), Options{OutputLimit: 1 << 20}, nil)
	slow, fast := dialLoop(t, path), dialLoop(t, path)
	big := strings.Repeat("x", 64<<10)
	// RESP, not inline: an inline command this long is a protocol error,
	// which would end the connection rather than pause it.
	cmd := fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(big), big)
	done := make(chan error, 1)
	go func() {
		// Far more than socket buffers and half the limit: the server
		// stops reading, so this blocks until the deadline.
		_ = slow.c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		for range 200 {
			if _, err := slow.c.Write([]byte(cmd)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 50 {
		fast.send("INCR k\r\n")
		fast.expect(":1\r\n")
	}
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writing 12 MiB to a server whose replies are never read: %v; want the write to block until its deadline (the server paused reading)", err)
	}
}

// A client that hangs up, with replies pending, while its command runs on
// a goroutine stays counted until the command comes back, so Serve cannot
// return, nor the loop close its descriptors, under that command. The
// loop used to close such a connection at once when writing its pending
// replies failed.
func TestLoopHangupDuringCommand(t *testing.T) {
	t.Parallel()
	g := gateStore{reading: make(chan struct{}), release: make(chan struct{})}
	s := New(pending.New(g, pending.Options{}), Options{IO: IOLoop, Loops: 1})
	type seen struct {
		doomed bool // a connection waits to be closed until its command ends
		conns  int
	}
	passes, stop := make(chan seen), make(chan struct{})
	var armed atomic.Bool
	s.loopHook = func(l *eloop) { // on the loop's goroutine, between passes
		if !armed.Load() {
			return
		}
		v := seen{conns: s.Conns()}
		for _, c := range l.conns {
			v.doomed = v.doomed || c.doomed
		}
		select {
		case passes <- v:
		case <-stop:
		}
	}
	defer close(stop)
	path := serveUnix(t, s)
	c := dialLoop(t, path)
	// A reply larger than the socket's buffers stays pending in the
	// server, so the hang-up fails the loop's write of it while the GET
	// still runs: that write error closes the connection.
	big := strings.Repeat("x", 500<<10)
	echo := fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(big), big)
	c.send(strings.Repeat(echo, 4) + "GET k\r\n")
	<-g.reading // the GET runs on a goroutine, waiting on the store
	armed.Store(true)
	c.c.Close()
	for v := range passes {
		if v.conns == 0 {
			t.Fatal("the connection was closed while its GET was still running")
		}
		if v.doomed {
			break
		}
	}
	close(g.release)
	for v := range passes {
		if v.conns == 0 {
			break // closed once the GET came back
		}
	}
}

// A client that takes none of its replies is disconnected at WriteTimeout
// even while a command of its runs on a goroutine (here a GET waiting on
// the store): it reads what was sent, then the end, before the GET
// returns. The connection stays counted, and a loop's descriptor open,
// until the GET comes back; then it is gone. The loops used to skip a busy
// connection when checking write timeouts, and the goroutines noticed a
// failed write only when they next wrote.
func TestWriteTimeoutDuringCommand(t *testing.T) {
	t.Parallel()
	for _, mode := range ioModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			g := gateStore{reading: make(chan struct{}), release: make(chan struct{})}
			set := metrics.NewSet()
			s := New(pending.New(g, pending.Options{}), Options{IO: mode, Loops: 1, WriteTimeout: 2 * time.Second, Metrics: set})
			c := dialLoop(t, serveUnix(t, s))
			// Replies larger than the socket's buffers stay pending in the
			// server while the GET waits.
			big := strings.Repeat("x", 500<<10)
			echo := fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(big), big)
			c.send(strings.Repeat(echo, 4) + "GET k\r\n")
			select {
			case <-g.reading:
			case <-time.After(30 * time.Second):
				// The write timeout (2 s, 200 ms when this was seen once in
				// a full suite run on a loaded machine) closed the
				// connection before the server read the GET: no command
				// ran while the client was disconnected, and this run has
				// nothing to check.
				t.Skip("the GET was not read within 30s: no command ran during the write timeout")
			}
			defer close(g.release)
			for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
				var b strings.Builder
				set.WritePrometheus(&b)
				if strings.Contains(b.String(), `counterd_clients_disconnected_total{reason="write_timeout"} 1`) {
					break
				}
				if time.Since(start) > 10*time.Second {
					t.Fatalf("not disconnected 10s after it stopped reading, while its GET runs:\n%s", b.String())
				}
			}
			_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, c.c); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the connection is still open after its write timeout")
			}
			if n := s.Conns(); n != 1 {
				t.Fatalf("%d connections while the GET runs; want 1, closed once it returns", n)
			}
			g.release <- struct{}{}
			for start := time.Now(); s.Conns() != 0; time.Sleep(10 * time.Millisecond) {
				if time.Since(start) > 10*time.Second {
					t.Fatalf("%d connections 10s after the GET returned; want 0", s.Conns())
				}
			}
		})
	}
}

// Several loops, each accepting into its own pending shard: every
// connection's increments are counted, and a read sees all the shards.
func TestLoopsWithOwnShards(t *testing.T) {
	t.Parallel()
	const loops, conns, each = 3, 12, 50
	buf := pending.New(emptyStore{}, pending.Options{Shards: loops})
	path := loopServer(t, buf, Options{Loops: loops}, nil)
	cs := make([]*loopClient, conns)
	for i := range cs {
		cs[i] = dialLoop(t, path) // handed to the loops round robin
		cs[i].send(strings.Repeat("INCR k\r\nINCRBY k 2\r\n", each))
	}
	for _, c := range cs {
		for range each {
			c.expect(":1\r\n", ":2\r\n")
		}
	}
	g := dialLoop(t, path)
	g.send("GET k\r\n")
	total := strconv.Itoa(conns * each * 3)
	g.expect(fmt.Sprintf("$%d\r\n", len(total)), total+"\r\n")
}

// What a connection grew for a large command or a pipelined burst is
// given back once it waits for input: its read buffer returns to 4 KiB
// and its group's room to a few hundred increments. Before, the buffer
// kept the command's size (up to 1 MiB) while the connection idled.
func TestConnBuffersGivenBack(t *testing.T) {
	t.Parallel()
	type sizes struct{ rd, group, conns int }
	ask, answer := make(chan struct{}), make(chan sizes)
	path := unixServer(t, Options{IO: IOLoop, Loops: 1}, func(s *Server) {
		s.loopHook = func(l *eloop) { // on the loop's goroutine, between passes
			select {
			case <-ask:
			default:
				return
			}
			var z sizes
			for _, c := range l.conns {
				z.rd, z.group, z.conns = max(z.rd, c.rd.Cap()), max(z.group, cap(c.sess.group)), z.conns+1
			}
			answer <- z
		}
	})
	measure := func() sizes {
		t.Helper()
		select {
		case ask <- struct{}{}: // the loop wakes at least every loopTick
		case <-time.After(20 * time.Second):
			t.Fatal("the loop did not run its hook")
		}
		return <-answer
	}
	c := dialLoop(t, path)
	big := strings.Repeat("b", 500<<10)
	c.send(fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(big), big))
	c.expect(fmt.Sprintf("$%d\r\n", len(big)), big+"\r\n")
	c.send(strings.Repeat("INCR k\r\n", 20000))
	for range 20000 {
		c.expect(":1\r\n")
	}
	// The replies are written before the connection goes idle; the hook
	// runs at the loop's next wake-up, after that pass.
	z := measure()
	if z.conns != 1 || z.rd != readBufSize || z.group > maxKeptGroup {
		t.Fatalf("idle connection after a 500 KiB command and 20,000 pipelined INCRs: read buffer %d bytes, room for %d increments (%d connections); want %d bytes, at most %d",
			z.rd, z.group, z.conns, readBufSize, maxKeptGroup)
	}
}

// A client whose last bytes and hang-up arrive together (one
// edge-triggered event with both) is closed: half a command then close,
// and a whole command then shutdown of its sending side, which gets its
// reply and then the end of the connection. The loop is parked while the
// client writes and hangs up, so epoll reports both in one event. Before,
// a short read marked the socket drained and its end of file was never
// read: the connection stayed open forever, holding a COUNTERD_MAX_CONNS
// slot, until new clients got "max number of clients reached".
func TestLoopDataAndHangupInOneEvent(t *testing.T) {
	t.Parallel()
	s := New(pending.New(nil, pending.Options{}), Options{IO: IOLoop, Loops: 1})
	var armed atomic.Bool
	parked, release := make(chan struct{}), make(chan struct{})
	s.loopHook = func(*eloop) { // before each epoll_wait
		if armed.CompareAndSwap(true, false) {
			parked <- struct{}{}
			<-release
		}
	}
	path := serveUnix(t, s)
	whileParked := func(f func()) {
		armed.Store(true)
		<-parked
		f()
		release <- struct{}{}
	}
	waitClosed := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); s.Conns() != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the server still holds %d connection(s) 30 s later; want it closed", what, s.Conns())
			}
		}
	}

	c := dialLoop(t, path)
	c.send("PING\r\n")
	c.expect("+PONG\r\n")
	whileParked(func() {
		c.send("*2\r\n$4\r\nPING\r\n$1\r\n") // half a command
		c.c.Close()
	})
	waitClosed("half a command, then close")

	c = dialLoop(t, path)
	c.send("PING\r\n")
	c.expect("+PONG\r\n")
	whileParked(func() {
		c.send("PING\r\n")
		if err := c.c.(*net.UnixConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	})
	c.expect("+PONG\r\n")
	if b, err := c.r.ReadByte(); err == nil {
		t.Fatalf("after shutdown of the client's side: read %q; want the end of the connection", b)
	}
	waitClosed("a command, then shutdown of the sending side")
}
