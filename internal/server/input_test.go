package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pending"
)

// unixServer serves an empty buffer with opts on a real Unix socket;
// setup, if any, runs before Serve.
func unixServer(t *testing.T, opts Options, setup func(*Server)) string {
	t.Helper()
	s := New(pending.New(emptyStore{}, pending.Options{Shards: opts.Loops}), opts)
	if setup != nil {
		setup(s)
	}
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s, ln)
	return path
}

// refusedWith sends in on a new connection (the server may close it
// before reading it all) and checks the reply is want, then that the
// connection is closed.
func refusedWith(t *testing.T, path, in, want string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() { _, _ = c.Write([]byte(in)) }() // may fail once refused
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil || line != want {
		t.Fatalf("%.40q...: got %q, %v; want %q", in, line, err, want)
	}
	if b, err := rd.ReadByte(); err == nil {
		t.Fatalf("%.40q...: read %q after the error; want the connection closed", in, b)
	} else if err != io.EOF && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("%.40q...: %v after the error; want the connection closed", in, err)
	}
}

func bulkArg(n int) string { return fmt.Sprintf("$%d\r\n%s\r\n", n, strings.Repeat("a", n)) }

// With a password set, a connection that has not authenticated may send
// only small commands, as Redis allows: a header announcing more is
// answered with Redis's error and the connection closed at once, so a
// client without the password cannot make the daemon buffer a megabyte
// per connection (it could, before, with or without a password). Once
// authenticated the usual limit applies.
func TestUnauthenticatedInputBounded(t *testing.T) {
	t.Parallel()
	for _, io := range []string{IOGoroutines, IOLoop} {
		t.Run(io, func(t *testing.T) {
			t.Parallel()
			path := unixServer(t, Options{IO: io, Password: "secret"}, nil)
			refusedWith(t, path, "*2\r\n$4\r\nAUTH\r\n$524288\r\n"+strings.Repeat("a", 100<<10),
				"-ERR Protocol error: unauthenticated bulk length\r\n")
			refusedWith(t, path, "*11\r\n"+strings.Repeat(bulkArg(1), 11),
				"-ERR Protocol error: unauthenticated multibulk length\r\n")
			refusedWith(t, path, "*3\r\n$4\r\nECHO\r\n"+bulkArg(16<<10)+bulkArg(16<<10),
				"-ERR Protocol error: unauthenticated request too big (limit 32768 bytes)\r\n")

			c := dialLoop(t, path)
			c.send("*2\r\n$4\r\nECHO\r\n" + bulkArg(10) + "PING\r\n")
			c.expect("-NOAUTH Authentication required.\r\n", "-NOAUTH Authentication required.\r\n")
			c.send("AUTH secret\r\n")
			c.expect("+OK\r\n")
			big := strings.Repeat("b", 500<<10)
			c.send(fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(big), big))
			c.expect(fmt.Sprintf("$%d\r\n", len(big)), big+"\r\n")
		})
	}
}

// A command past Options.QueryLimit (COUNTERD_CLIENT_QUERY_BUFFER_LIMIT)
// is answered with an error naming the limit, and the connection closed,
// as soon as its header says it is too big; one within it is served.
func TestQueryLimit(t *testing.T) {
	t.Parallel()
	for _, io := range []string{IOGoroutines, IOLoop} {
		t.Run(io, func(t *testing.T) {
			t.Parallel()
			path := unixServer(t, Options{IO: io, QueryLimit: 64 << 10}, nil)
			c := dialLoop(t, path)
			within := strings.Repeat("w", 60000)
			c.send(fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(within), within))
			c.expect(fmt.Sprintf("$%d\r\n", len(within)), within+"\r\n")
			refusedWith(t, path, "*2\r\n$4\r\nECHO\r\n$70000\r\n"+strings.Repeat("x", 70000)+"\r\n",
				"-ERR Protocol error: too big request (limit 65536 bytes)\r\n")
			refusedWith(t, path, strings.Repeat("INCR k ", 20000),
				"-ERR Protocol error: too big inline request (limit 65535 bytes)\r\n")
		})
	}
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
