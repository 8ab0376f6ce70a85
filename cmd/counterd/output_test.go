package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
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
// daemon keeps serving everyone else.
func TestClientNeverReads(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_CLIENT_WRITE_TIMEOUT=1s")
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	// Far more replies than socket buffers hold; the write fails once
	// counterd closes the connection.
	_, werr := c.Write(incrs(5_000_000))
	if werr == nil {
		t.Fatal("wrote 5,000,000 INCRs without reading and the connection is still open")
	}
	if !d.waitLog("did not read its replies", 10*time.Second) {
		t.Fatalf("no warning about the client (write error %v)\n%s", werr, d.log())
	}
	for _, line := range strings.Split(d.log(), "\n") {
		if strings.Contains(line, "did not read its replies") && (!strings.Contains(line, "level=WARN") || !strings.Contains(line, "conn=")) {
			t.Fatalf("log line %q: want a warning naming the connection", line)
		}
	}
	if err := client(t, d.socket).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after the disconnection: %v", err)
	}
	if m := httpGet(t, "http://"+d.metricsAddr()+"/metrics"); !strings.Contains(m, `counterd_clients_disconnected_total{reason="write_timeout"} 1`) {
		t.Fatalf("metrics lack the disconnection:\n%s", m)
	}
}
