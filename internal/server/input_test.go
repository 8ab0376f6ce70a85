package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/journal"
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
	return serveUnix(t, s)
}

// serveUnix serves s on a real Unix socket until the test ends and returns
// the socket's path.
func serveUnix(t *testing.T, s *Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s, ln)
	return path
}

// loopClient is a client on a real Unix socket, under either I/O mode.
type loopClient struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialLoop(t *testing.T, path string) *loopClient {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return &loopClient{t, c, bufio.NewReader(c)}
}

func (c *loopClient) send(cmd string) {
	c.t.Helper()
	if _, err := c.c.Write([]byte(cmd)); err != nil {
		c.t.Fatalf("write %q: %v", cmd, err)
	}
}

func (c *loopClient) expect(want ...string) {
	c.t.Helper()
	for _, w := range want {
		line, err := c.r.ReadString('\n')
		if err != nil || line != w {
			c.t.Fatalf("got %q, %v; want %q", line, err, w)
		}
	}
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
	for _, io := range ioModes {
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
	for _, io := range ioModes {
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

// countingJournal counts appends: one per loop pass with increments.
type countingJournal struct {
	*journal.Journal
	appends atomic.Int64
}

func (j *countingJournal) AppendRecord(rec []byte, n int) (journal.Position, error) {
	j.appends.Add(1)
	return j.Journal.AppendRecord(rec, n)
}

func openCounting(t *testing.T) *countingJournal {
	t.Helper()
	jr, _, err := journal.Open(journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncNo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jr.Close() })
	return &countingJournal{Journal: jr}
}
