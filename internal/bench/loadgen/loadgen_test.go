package loadgen_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/bench/loadgen"
	"github.com/counterd/counterd/internal/resp"
)

// server is a minimal RESP server: it answers every command with :1, or
// -ERR when the key ends in "bad", optionally after a delay, and counts
// what it answered without allocating. first is closed once it has
// received a command.
type server struct {
	ln    net.Listener
	delay time.Duration
	cmds  atomic.Int64
	hot   atomic.Int64 // commands on post:0
	hash  atomic.Int64 // HINCRBY h key 1 commands
	wg    sync.WaitGroup
	first chan struct{}
	once  sync.Once
}

func startServer(t testing.TB, delay time.Duration) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, delay: delay, first: make(chan struct{})}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

// serve answers every command already buffered, then writes the replies
// at once and reads again.
func (s *server) serve(c net.Conn) {
	defer c.Close()
	rd := resp.NewReader(c, 64<<10)
	wr := bufio.NewWriter(c)
	for {
		for {
			args, ok, err := rd.Next()
			if err != nil {
				return
			}
			if !ok {
				break
			}
			s.once.Do(func() { close(s.first) })
			if s.delay > 0 {
				time.Sleep(s.delay) // a slow server, not a wait for an event
			}
			s.cmds.Add(1)
			key := args[len(args)-1]
			if len(args) == 4 && string(args[0]) == "HINCRBY" && string(args[1]) == "h" && string(args[3]) == "1" {
				s.hash.Add(1)
				key = args[2]
			}
			switch {
			case string(key) == "post:0":
				s.hot.Add(1)
				wr.WriteString(":1\r\n")
			case bytes.HasSuffix(key, []byte("bad")):
				wr.WriteString("-ERR bad key\r\n")
			default:
				wr.WriteString(":1\r\n")
			}
		}
		if wr.Flush() != nil || rd.Fill() != nil {
			return
		}
	}
}

func TestRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		cfg              loadgen.Config
		wantOps, wantErr int64
		wantHot          int64 // -1: any
	}{
		{"default keys", loadgen.Config{Clients: 3, Pipeline: 7, Requests: 1000}, 1000, 0, -1},
		{"source", loadgen.Config{Clients: 4, Pipeline: 16, Requests: 999,
			Source: func(*rand.Rand) func() uint64 { return func() uint64 { return 0 } }}, 999, 0, 999},
		{"key func with errors", loadgen.Config{Clients: 2, Pipeline: 2, Requests: 100,
			Key: func(_ *rand.Rand, _, i int) string {
				if i%2 == 0 {
					return "post:bad"
				}
				return "post:good"
			}}, 50, 50, 0},
		{"paced", loadgen.Config{Clients: 2, Requests: 200, Rate: 20000}, 200, 0, -1},
		{"hash", loadgen.Config{Clients: 2, Pipeline: 4, Requests: 100, Hash: "h",
			Source: func(*rand.Rand) func() uint64 { return func() uint64 { return 0 } }}, 100, 0, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, 0)
			tc.cfg.Network, tc.cfg.Addr = "tcp", s.ln.Addr().String()
			res, err := loadgen.Run(context.Background(), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Ops != tc.wantOps || res.Errors != tc.wantErr {
				t.Fatalf("ops %d errors %d; want %d %d", res.Ops, res.Errors, tc.wantOps, tc.wantErr)
			}
			if got := s.cmds.Load(); got != tc.wantOps+tc.wantErr {
				t.Fatalf("server answered %d commands; want %d", got, tc.wantOps+tc.wantErr)
			}
			if want := map[bool]int64{true: tc.wantOps}[tc.cfg.Hash != ""]; s.hash.Load() != want {
				t.Fatalf("server got %d HINCRBY h KEY 1; want %d", s.hash.Load(), want)
			}
			if tc.wantHot >= 0 && s.hot.Load() != tc.wantHot {
				t.Fatalf("post:0 got %d commands; want %d", s.hot.Load(), tc.wantHot)
			}
			if res.P50 <= 0 || res.P99 < res.P50 {
				t.Fatalf("latencies p50 %v p99 %v; want 0 < p50 <= p99", res.P50, res.P99)
			}
		})
	}
}

// TestRateBoundsTheLoad checks that a paced load never sends more than
// its rate allows; how close it gets depends on the machine, so the lower
// bound is only that it ran.
func TestRateBoundsTheLoad(t *testing.T) {
	t.Parallel()
	s := startServer(t, 0)
	const rate, clients = 2000, 4
	dur := 300 * time.Millisecond
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		Network: "tcp", Addr: s.ln.Addr().String(), Clients: clients, Duration: dur, Rate: rate,
	})
	if err != nil {
		t.Fatal(err)
	}
	if max := int64(rate*dur.Seconds()) + clients; res.Ops > max || res.Ops == 0 {
		t.Fatalf("%d commands in %v at %d/s; want 1..%d", res.Ops, dur, rate, max)
	}
}

// TestPacedLatencyIncludesQueueing offers a server that answers one
// command per 5ms far more than it can take: latency measured from the
// scheduled send time grows with the backlog, while the closed loop only
// sees the service time.
func TestPacedLatencyIncludesQueueing(t *testing.T) {
	t.Parallel()
	const service = 5 * time.Millisecond
	run := func(rate float64) loadgen.Result {
		s := startServer(t, service)
		res, err := loadgen.Run(context.Background(), loadgen.Config{
			Network: "tcp", Addr: s.ln.Addr().String(), Duration: 200 * time.Millisecond, Rate: rate,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	paced, closed := run(2000), run(0)
	if paced.P99 < 10*service {
		t.Errorf("paced p99 %v; want at least %v (the backlog)", paced.P99, 10*service)
	}
	if closed.P50 > paced.P50 {
		t.Errorf("closed-loop p50 %v above paced p50 %v; want the paced one to include queueing", closed.P50, paced.P50)
	}
}

// TestPerSecond: a paced run of 1.5 s has two seconds, which between them
// hold every command answered and the run's longest latency; the server's
// 5 ms per command shows in each second's longest.
func TestPerSecond(t *testing.T) {
	t.Parallel()
	const service = 5 * time.Millisecond
	s := startServer(t, service)
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		Network: "tcp", Addr: s.ln.Addr().String(), Clients: 2, Duration: 1500 * time.Millisecond, Rate: 100, PerSecond: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Seconds) != 2 {
		t.Fatalf("%d seconds for a paced run of 1.5 s: %+v; want 2", len(res.Seconds), res.Seconds)
	}
	var ops int64
	var longest time.Duration
	for i, sec := range res.Seconds {
		if sec.Ops == 0 || sec.Max < service {
			t.Errorf("second %d: %d commands, longest %v; want some, each at least %v", i, sec.Ops, sec.Max, service)
		}
		ops += sec.Ops
		longest = max(longest, sec.Max)
	}
	if ops != res.Ops || longest != res.Max {
		t.Errorf("seconds hold %d commands, longest %v; want the run's %d and %v", ops, longest, res.Ops, res.Max)
	}
	res, err = loadgen.Run(context.Background(), loadgen.Config{Network: "tcp", Addr: s.ln.Addr().String(), Requests: 10})
	if err != nil || res.Seconds != nil {
		t.Errorf("without PerSecond: seconds %v (err %v); want none", res.Seconds, err)
	}
}

// TestCancel cancels a load once the server has its first command: Run
// returns promptly with the context's error, closed loop or paced.
func TestCancel(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{0, 1} {
		s := startServer(t, 0)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := loadgen.Run(ctx, loadgen.Config{Network: "tcp", Addr: s.ln.Addr().String(), Duration: time.Hour, Rate: rate})
			done <- err
		}()
		select {
		case <-s.first:
		case err := <-done:
			t.Fatalf("rate %v: Run returned %v before the server had a command", rate, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("rate %v: no command reached the server within 10s", rate)
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("rate %v: Run after cancel returned %v; want context.Canceled", rate, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("rate %v: Run did not return within 10s of cancel", rate)
		}
	}
}

func TestNeedsRequestsOrDuration(t *testing.T) {
	t.Parallel()
	if _, err := loadgen.Run(context.Background(), loadgen.Config{}); err == nil {
		t.Fatal("Run without Requests or Duration: got nil; want an error")
	}
}

// TestNoAllocationsPerCommand compares the allocations of a short and a
// long run: what a command costs shows up as the difference. It does not
// run in parallel, since the count is process-wide.
func TestNoAllocationsPerCommand(t *testing.T) {
	s := startServer(t, 0)
	for _, cfg := range []loadgen.Config{
		{Clients: 2, Pipeline: 16},
		{Clients: 2, Pipeline: 1},
		{Clients: 2, Pipeline: 1, Rate: 1e9},
		{Clients: 2, Pipeline: 8, Source: func(rng *rand.Rand) func() uint64 { return func() uint64 { return rng.Uint64N(1e9) } }},
		{Clients: 2, Pipeline: 1, PerSecond: true},
	} {
		cfg.Network, cfg.Addr = "tcp", s.ln.Addr().String()
		allocs := func(n int) uint64 {
			cfg.Requests = n
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if _, err := loadgen.Run(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			return after.Mallocs - before.Mallocs
		}
		allocs(1000) // warm up
		small, large := allocs(2000), allocs(20000)
		if per := (float64(large) - float64(small)) / 18000; per > 0.01 {
			t.Errorf("pipeline %d rate %v: %.3f allocations per command (%d vs %d); want 0", cfg.Pipeline, cfg.Rate, per, small, large)
		}
	}
}

func BenchmarkRun(b *testing.B) {
	s := startServer(b, 0)
	b.ReportAllocs()
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		Network: "tcp", Addr: s.ln.Addr().String(), Clients: 2, Pipeline: 16, Requests: b.N,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.Rate(), "incr/s")
}
