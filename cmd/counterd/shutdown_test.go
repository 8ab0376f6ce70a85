package main

import (
	"bufio"
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/bench/loadgen"
	"github.com/counterd/counterd/internal/pgtest"
)

// dialRaw connects to socket with a deadline for the whole test.
func dialRaw(t *testing.T, socket string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	return c
}

// waitReadable blocks until c has bytes to read, without reading them.
func waitReadable(t *testing.T, c net.Conn) {
	t.Helper()
	rc, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	polled := false
	err = rc.Read(func(uintptr) bool {
		// The first call says "would block", so the runtime waits for
		// readability; the second comes once there is something to read.
		defer func() { polled = true }()
		return polled
	})
	if err != nil {
		t.Fatalf("waiting for a reply: %v", err)
	}
}

// A client that sends a command and never reads the reply leaves the
// daemon blocked in a write; SIGTERM must still end the daemon within
// COUNTERD_SHUTDOWN_TIMEOUT (plus the final flush), exit code 0.
func TestShutdownWithNonReadingClient(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_SHUTDOWN_TIMEOUT=2s")
	c := dialRaw(t, d.socket)
	// One inline command of ~60 KB whose reply (~390 KB) is larger than
	// what a Unix socket buffers, so the daemon must block writing it.
	if _, err := c.Write([]byte("CONFIG GET" + strings.Repeat(" a", 30000) + "\r\n")); err != nil {
		t.Fatal(err)
	}
	waitReadable(t, c) // the daemon is writing, and cannot finish
	start := time.Now()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("counterd still running 30s after SIGTERM with COUNTERD_SHUTDOWN_TIMEOUT=2s\n%s", d.log())
	}
	if d.err != nil {
		t.Fatalf("exit: %v; want 0\n%s", d.err, d.log())
	}
	t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(d.log(), "closing connections still open after the shutdown timeout") {
		t.Errorf("log does not say the connection was closed at the bound:\n%s", d.log())
	}
}

// A FLUSH the daemon read before SIGTERM is answered truthfully: +OK once
// the round commits, not an error because shutdown began.
func TestShutdownAnswersFlushInProgress(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	ctx := context.Background()

	// Hold the round's INSERT back with a lock it waits for.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE counter_slots IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, d.socket)
	if _, err := c.Write([]byte("INCR post:f\r\nFLUSH\r\n")); err != nil {
		t.Fatal(err)
	}
	// With a 1h interval only FLUSH starts a round, so a waiter on the
	// lock means the daemon has read FLUSH and is in it. PostgreSQL has no
	// signal for a lock waiter: poll pg_locks, bounded.
	waiting := false
	for start := time.Now(); !waiting && time.Since(start) < 30*time.Second; {
		var n int
		err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'counter_slots'::regclass`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if waiting = n > 0; !waiting {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !waiting {
		t.Fatalf("the flush round never waited on the lock\n%s", d.log())
	}

	replies := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			replies <- sc.Text()
		}
		close(replies)
	}()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	logged := make(chan bool, 1)
	go func() { logged <- d.waitLog("shutting down", 30*time.Second) }()
	select {
	case r := <-replies:
		t.Fatalf("reply %q at SIGTERM, before the round could commit; want the replies after it", r)
	case ok := <-logged:
		if !ok {
			t.Fatalf("no shutdown in the log\n%s", d.log())
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{":1", "+OK"} {
		if got, ok := <-replies; !ok || got != want {
			t.Fatalf("reply: got %q (open %v); want %q\n%s", got, ok, want, d.log())
		}
	}
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("counterd did not exit after SIGTERM\n%s", d.log())
	}
	if d.err != nil {
		t.Fatalf("exit: %v\n%s", d.err, d.log())
	}
	if got := total(t, db, "post:f"); got != 1 {
		t.Fatalf("post:f: got %d; want 1", got)
	}
}

// SIGTERM while clients are busy is a clean stop: exit 0 and no ERROR
// line (a cancelled context at shutdown is not an error).
func TestCleanStopLogsNoError(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_LOG_LEVEL=info")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		// Errors are expected: the daemon closes the connections. The
		// duration only bounds the load; the stop ends it.
		_, _ = loadgen.Run(ctx, loadgen.Config{
			Network: "unix", Addr: d.socket, Clients: 8, Pipeline: 16, Duration: 2 * time.Minute,
			Key: func(rng *rand.Rand, _, _ int) string { return "post:" + strconv.Itoa(rng.IntN(1000)) },
		})
	}()
	// Stop once the load has run into flush rounds: a round wrote keys.
	// (A process has no signal for that; its metrics are polled, bounded.)
	metricsURL := "http://" + d.metricsAddr() + "/metrics"
	if !poll(time.Minute, func() bool {
		m := httpGet(t, metricsURL)
		return strings.Contains(m, "counterd_flush_keys_total ") && !strings.Contains(m, "counterd_flush_keys_total 0\n")
	}) {
		t.Fatalf("no round wrote keys within a minute under load\n%s", d.log())
	}
	d.stop()
	cancel()
	<-loaded
	for _, line := range strings.Split(d.log(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("an error logged around a clean SIGTERM: %s", line)
		}
	}
}
