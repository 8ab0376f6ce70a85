// Package loadgen drives a Redis-protocol server with pipelined INCR
// commands from many connections and measures throughput and latency.
//
// It speaks raw RESP over its own buffers so that the client, not the
// server, is never the bottleneck being measured; the same code drives
// counterd and redis-server, so their numbers compare. Latency is the
// round trip of one pipeline, as redis-benchmark reports it.
package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes one load.
type Config struct {
	Network, Addr string
	// Clients is the number of connections (default 1).
	Clients int
	// Pipeline is how many commands each connection sends before it reads
	// the replies (default 1).
	Pipeline int
	// Requests is the total number of commands; Duration bounds the run
	// when Requests is 0.
	Requests int
	Duration time.Duration
	// Key returns the key of a client's i-th command (default: post:R for
	// a random R below Keys).
	Key  func(rng *rand.Rand, client, i int) string
	Keys int
	// Incr is the command's name (default INCR).
	Incr string
}

// Result is what a run measured.
type Result struct {
	Ops     int64 // commands answered without error
	Errors  int64 // error replies
	Elapsed time.Duration
	// P50 and P99 are pipeline round-trip latencies.
	P50, P99 time.Duration
}

// Rate is commands answered per second.
func (r Result) Rate() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// Run sends the load and waits for every reply.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Clients <= 0 {
		cfg.Clients = 1
	}
	if cfg.Pipeline <= 0 {
		cfg.Pipeline = 1
	}
	if cfg.Keys <= 0 {
		cfg.Keys = 100000
	}
	if cfg.Incr == "" {
		cfg.Incr = "INCR"
	}
	if cfg.Key == nil {
		keys := cfg.Keys
		cfg.Key = func(rng *rand.Rand, _, _ int) string { return "post:" + strconv.Itoa(rng.IntN(keys)) }
	}
	if cfg.Requests <= 0 && cfg.Duration <= 0 {
		return Result{}, errors.New("loadgen: set Requests or Duration")
	}
	var (
		remaining atomic.Int64
		deadline  time.Time
		wg        sync.WaitGroup
		mu        sync.Mutex
		res       Result
		lat       []time.Duration
		firstErr  error
	)
	remaining.Store(int64(cfg.Requests))
	if cfg.Requests <= 0 {
		deadline = time.Now().Add(cfg.Duration)
	}
	start := time.Now()
	for c := range cfg.Clients {
		wg.Go(func() {
			w := worker{cfg: cfg, id: c, rng: rand.New(rand.NewPCG(uint64(c), 42))}
			err := w.run(ctx, &remaining, deadline)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("client %d: %w", c, err)
			}
			res.Ops += w.ops
			res.Errors += w.errs
			lat = append(lat, w.lat...)
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50 = lat[len(lat)/2]
		res.P99 = lat[len(lat)*99/100]
	}
	return res, firstErr
}

type worker struct {
	cfg  Config
	id   int
	rng  *rand.Rand
	ops  int64
	errs int64
	lat  []time.Duration
}

func (w *worker) run(ctx context.Context, remaining *atomic.Int64, deadline time.Time) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, w.cfg.Network, w.cfg.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	rd := bufio.NewReaderSize(conn, 64<<10)
	buf := make([]byte, 0, 64<<10)
	for i := 0; ; {
		n := w.cfg.Pipeline
		if deadline.IsZero() {
			left := remaining.Add(-int64(n))
			if left < 0 {
				n += int(left)
			}
			if n <= 0 {
				return nil
			}
		} else if time.Now().After(deadline) {
			return nil
		}
		buf = buf[:0]
		for range n {
			buf = appendCommand(buf, w.cfg.Incr, w.cfg.Key(w.rng, w.id, i))
			i++
		}
		t0 := time.Now()
		if _, err := conn.Write(buf); err != nil {
			return err
		}
		for range n {
			ok, err := readReply(rd)
			if err != nil {
				return err
			}
			if ok {
				w.ops++
			} else {
				w.errs++
			}
		}
		w.lat = append(w.lat, time.Since(t0))
	}
}

func appendCommand(b []byte, cmd, key string) []byte {
	b = append(b, "*2\r\n$"...)
	b = strconv.AppendInt(b, int64(len(cmd)), 10)
	b = append(b, "\r\n"...)
	b = append(b, cmd...)
	b = append(b, "\r\n$"...)
	b = strconv.AppendInt(b, int64(len(key)), 10)
	b = append(b, "\r\n"...)
	b = append(b, key...)
	return append(b, "\r\n"...)
}

// readReply reads one reply and reports whether it was not an error.
func readReply(rd *bufio.Reader) (bool, error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return false, err
	}
	if len(line) < 3 {
		return false, fmt.Errorf("short reply %q", line)
	}
	switch line[0] {
	case ':', '+':
		return true, nil
	case '-':
		return false, nil
	case '$':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil {
			return false, fmt.Errorf("bad bulk header %q", line)
		}
		if n >= 0 {
			if _, err := rd.Discard(n + 2); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	return false, fmt.Errorf("unexpected reply %q", line)
}
