package server

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pending"
)

// idleConnBytes opens n connections to a real Unix socket, has each answer
// one PING so its goroutine and buffers exist, and returns the heap and
// goroutine stack bytes per connection (client side included: a few
// hundred bytes of net.Conn).
func idleConnBytes(tb testing.TB, n int) (heap, stack float64) {
	tb.Helper()
	dir, err := os.MkdirTemp("", "mem")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		tb.Fatal(err)
	}
	s := New(pending.New(nil, pending.Options{}), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		cancel()
		<-done
	}()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	reply := make([]byte, 7)
	for range n {
		c, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			tb.Fatal(err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			tb.Fatal(err)
		}
		if _, err := bufio.NewReader(c).Read(reply); err != nil {
			tb.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
	stack = float64(int64(after.StackInuse)-int64(before.StackInuse)) / float64(n)
	return heap, stack
}

// TestIdleConnMemory checks that idle connections stay small: 2,000 of
// them used to cost ~130 KiB each (a 64 KiB read buffer and a 64 KiB
// reply buffer allocated up front). Not parallel: it measures the whole
// process's heap.
func TestIdleConnMemory(t *testing.T) {
	const n = 2000
	heap, stack := idleConnBytes(t, n)
	t.Logf("per idle connection: %.0f heap bytes, %.0f stack bytes", heap, stack)
	if heap > 16<<10 {
		t.Fatalf("per idle connection: %.0f heap bytes; want at most 16 KiB", heap)
	}
}

// BenchmarkIdleConns reports heap and stack bytes per idle connection.
func BenchmarkIdleConns(b *testing.B) {
	for b.Loop() {
		heap, stack := idleConnBytes(b, 2000)
		b.ReportMetric(heap, "heap-B/conn")
		b.ReportMetric(stack, "stack-B/conn")
	}
}
