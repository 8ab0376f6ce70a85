package server

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/pending"
)

// syncBuffer is a log destination tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A reply larger than OutputLimit closes the connection with a warning
// that names the connection, and is counted; the server keeps serving.
func TestOutputLimitDisconnects(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	var log syncBuffer
	s := New(pending.New(nil, pending.Options{}), Options{
		OutputLimit: 100 << 10, Metrics: set, Logger: slog.New(slog.NewTextHandler(&log, nil)),
	})
	ln := newFakeListener()
	serve(t, s, ln)

	c := ln.dial(t)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := strings.Repeat("x", 200<<10) // PING msg replies msg: past the limit
	go fmt.Fprintf(c, "*2\r\n$4\r\nPING\r\n$%d\r\n%s\r\n", len(msg), msg)
	got, err := io.ReadAll(c)
	if err != nil || len(got) != 0 {
		t.Fatalf("read: %d bytes, %v; want the connection closed without a reply", len(got), err)
	}
	var b strings.Builder
	set.WritePrometheus(&b)
	if !strings.Contains(b.String(), `counterd_clients_disconnected_total{reason="output_limit"} 1`) {
		t.Fatalf("metrics lack the disconnection:\n%s", b.String())
	}
	if l := log.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "conn=1") || strings.Contains(l, "xxxx") {
		t.Fatalf("log %q: want a warning naming conn=1 and no key or argument text", l)
	}
	roundTrip(t, ln.dial(t), "PING\r\n", "+PONG\r\n")
}

// A client that stops reading is disconnected after WriteTimeout.
func TestWriteTimeoutDisconnects(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	s := New(pending.New(nil, pending.Options{}), Options{WriteTimeout: 200 * time.Millisecond, Metrics: set})
	ln := newFakeListener()
	serve(t, s, ln)
	c := ln.dial(t)
	// net.Pipe has no buffer: the reply write blocks until the deadline.
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		var b strings.Builder
		set.WritePrometheus(&b)
		if strings.Contains(b.String(), `counterd_clients_disconnected_total{reason="write_timeout"} 1`) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("not disconnected 10s after it stopped reading:\n%s", b.String())
		}
	}
	roundTrip(t, ln.dial(t), "PING\r\n", "+PONG\r\n")
}
