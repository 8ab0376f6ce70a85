package main

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// ping sends PING on a fresh connection and checks the reply.
func ping(t *testing.T, socket string) {
	t.Helper()
	c := dialRaw(t, socket)
	defer c.Close()
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING: got %q, %v; want +PONG", line, err)
	}
}

// tryPing reports whether a new connection to socket answers PING.
func tryPing(socket string) bool {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// Running out of file descriptors makes accept fail; the daemon logs it,
// keeps running and serves again once descriptors are free. Clients
// cannot exhaust them any more (COUNTERD_MAX_CONNS is capped to leave a
// reserve, TestDescriptorReserve), so the test takes them away by
// lowering the running daemon's limit to the three it always holds.
func TestAcceptSurvivesFileDescriptorExhaustion(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	ping(t, d.socket) // the event loops are up: they need descriptors too
	pid := d.cmd.Process.Pid
	orig := lowerFDLimit(t, pid, 3)
	// The connection waits in the listen backlog while accept fails.
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The accept loop's own line: other parts (the database pool's
	// dials) may log "too many open files" first, before accept tried.
	failed := d.waitLog("accept failed; retrying", 30*time.Second) && strings.Contains(d.log(), "too many open files")
	if err := restoreFDLimit(pid, orig); err != nil {
		t.Fatalf("restore the daemon's open file limit: %v", err)
	}
	select {
	case <-d.exited:
		t.Fatalf("counterd exited when accept failed: %v\n%s", d.err, d.log())
	default:
	}
	if !failed {
		t.Fatalf("accept never failed with no descriptor left\n%s", d.log())
	}
	// The waiting connection is served once accept retries.
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING on the connection made while accept failed: got %q, %v; want +PONG\n%s", line, err, d.log())
	}
	ping(t, d.socket)
	body := httpGet(t, "http://"+d.metricsAddr()+"/metrics")
	if !strings.Contains(body, "counterd_accept_errors_total") || strings.Contains(body, "counterd_accept_errors_total 0\n") {
		t.Errorf("/metrics does not count the accept errors")
	}
	d.stop()
}

// Past COUNTERD_MAX_CONNS a new connection gets Redis's error and is
// closed; the connections already open keep working.
func TestMaxConnsRefused(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_MAX_CONNS=2")
	var open []*bufio.ReadWriter
	for range 2 {
		c := dialRaw(t, d.socket)
		rw := bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
		pingOn(t, rw)
		open = append(open, rw)
	}
	c := dialRaw(t, d.socket)
	_, _ = c.Write([]byte("PING\r\n"))
	rd := bufio.NewReader(c)
	if line, err := rd.ReadString('\n'); err != nil || line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third connection: got %q, %v; want -ERR max number of clients reached", line, err)
	}
	if b, err := rd.ReadByte(); err == nil {
		t.Fatalf("third connection: read %q after the error; want it closed", b)
	}
	for _, rw := range open {
		pingOn(t, rw)
	}
	body := httpGet(t, "http://"+d.metricsAddr()+"/metrics")
	if !strings.Contains(body, "counterd_connections_refused_total 1\n") {
		t.Errorf("/metrics lacks counterd_connections_refused_total 1")
	}
	d.stop()
}

func pingOn(t *testing.T, rw *bufio.ReadWriter) {
	t.Helper()
	if _, err := rw.WriteString("PING\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := rw.Flush(); err != nil {
		t.Fatal(err)
	}
	if line, err := rw.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING: got %q, %v; want +PONG", line, err)
	}
}
