package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// incrs is n pipelined INCR k commands.
func incrs(n int) []byte {
	return bytes.Repeat([]byte("*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n"), n)
}

// A client that writes a million pipelined INCRs from one goroutine while
// another reads the replies gets every reply: counterd stops reading
// while its replies are unsent, and carries on as the client reads.
func TestPipelineMillion(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(incrs(n))
		wrote <- err
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	reply := make([]byte, 4)
	for i := range n {
		if _, err := io.ReadFull(r, reply); err != nil || string(reply) != ":1\r\n" {
			t.Fatalf("reply %d: %q, %v; want :1", i, reply, err)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatalf("write: %v", err)
	}
	flush(t, d.socket)
	if v, err := client(t, d.socket).Get(context.Background(), "k").Int64(); err != nil || v != n {
		t.Fatalf("GET k: %d, %v; want %d", v, err, n)
	}
}

// A client that never reads its replies is disconnected once they have
// waited COUNTERD_CLIENT_WRITE_TIMEOUT, with a warning and a metric; the
// daemon keeps serving everyone else, and every increment it acknowledged
// is counted.
//
// The smallest output limit makes the daemon stop reading the client
// after 512 KiB of unsent replies (about 131,000 INCRs), so the client's
// writes block until the daemon gives up on it, however fast the machine
// reads: the test writes until the daemon closes the connection.
func TestClientNeverReads(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_CLIENT_OUTPUT_LIMIT=1048576", "COUNTERD_CLIENT_WRITE_TIMEOUT=1s")
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	// 4M INCRs is 30 times what the daemon takes before it stops reading
	// (socket buffers included); a daemon that read them all would have
	// passed the output limit with 16 MB of unsent replies.
	const chunk, chunks = 16 << 10, 256
	batch := incrs(chunk)
	var werr error
	sent := 0
	for range chunks {
		n, err := c.Write(batch)
		sent += n
		if werr = err; err != nil {
			break
		}
	}
	switch {
	case werr == nil:
		t.Fatalf("wrote %d INCRs without reading and the connection is still open", chunk*chunks)
	case errors.Is(werr, os.ErrDeadlineExceeded):
		t.Fatalf("the daemon did not close a connection that read nothing within 2 minutes\n%s", d.log())
	}
	if !d.waitLog("did not read its replies", time.Minute) {
		t.Fatalf("no warning about the client (write error %v)\n%s", werr, d.log())
	}
	for _, line := range strings.Split(d.log(), "\n") {
		if strings.Contains(line, "did not read its replies") && (!strings.Contains(line, "level=WARN") || !strings.Contains(line, "conn=")) {
			t.Fatalf("log line %q: want a warning naming the connection", line)
		}
	}
	// The replies the daemon sent before it closed the connection are
	// still in the socket: those increments were acknowledged.
	replies, _ := io.ReadAll(c)
	acked := int64(bytes.Count(replies, []byte(":1\r\n")))
	if int64(len(replies)) != 4*acked {
		t.Fatalf("read %d bytes of replies, %d of them :1; want only :1 replies", len(replies), acked)
	}
	if err := client(t, d.socket).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after the disconnection: %v", err)
	}
	if m := httpGet(t, "http://"+d.metricsAddr()+"/metrics"); !strings.Contains(m, `counterd_clients_disconnected_total{reason="write_timeout"} 1`) {
		t.Fatalf("metrics lack the disconnection:\n%s", m)
	}
	flush(t, d.socket)
	// Counted: at least every acknowledged INCR, at most every one sent.
	if got, most := total(t, db, "k"), int64(sent/len(incrs(1))); got < acked || got > most {
		t.Fatalf("counter_totals k: got %d; want between %d acknowledged and %d sent", got, acked, most)
	}
}
