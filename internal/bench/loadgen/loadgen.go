// Package loadgen drives a Redis-protocol server with pipelined INCR (or
// HINCRBY) commands from many connections and measures throughput and latency.
//
// It speaks raw RESP over its own buffers so that the client, not the
// server, is never the bottleneck being measured; the same code drives
// counterd and redis-server, so their numbers compare. Sending a command
// allocates nothing: keys are written straight into the send buffer and
// latencies go into a fixed-size histogram.
//
// Without a Rate every connection is a closed loop: it sends a pipeline,
// waits for its replies and sends the next. With a Rate, each connection
// has a fixed schedule (Rate/Clients commands per second each) and latency
// is measured from the time a pipeline was due, not from when it went, so
// a server that falls behind shows its queueing delay rather than hiding
// it (no coordinated omission). Because Go's timers can wake a millisecond
// late, a client sends up to a millisecond before the due time, and then
// only the round trip counts. A connection still has at most one pipeline
// in flight, so a server slower than the offered rate is offered less:
// compare Result.Rate with the rate asked for.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/bench/latency"
	"github.com/counterd/counterd/internal/resp"
)

// Config describes one load.
type Config struct {
	// Network and Addr name the server, as net.Dial takes them.
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
	// Rate, when positive, paces the load at this many commands per second
	// in total, spread evenly over the clients.
	Rate float64
	// Source returns, for one client, a function drawing the index of each
	// command's key; the key is keyspace.Name(index). It takes precedence
	// over Key. The default draws uniformly below Keys.
	Source func(rng *rand.Rand) func() uint64
	// Key returns the key of a client's i-th command, for keys that are
	// not keyspace names. A Key that builds a new string allocates.
	Key  func(rng *rand.Rand, client, i int) string
	Keys int
	// Seed varies the clients' random streams between runs (default 0).
	Seed uint64
	// PerSecond records Result.Seconds.
	PerSecond bool
	// Hash, when set, makes each command HINCRBY Hash key 1 (the
	// Redis-buffer pattern's write) instead of INCR key.
	Hash string
}

// Second is one second of a run: the commands answered in pipelines sent
// (or, paced, due) in it, and the longest latency among them.
type Second struct {
	Ops int64
	Max time.Duration
}

// Result is what a run measured.
type Result struct {
	Ops     int64 // commands answered without error
	Errors  int64 // error replies
	Elapsed time.Duration
	// P50, P99 and P999 are pipeline latencies: the round trip of one
	// pipeline, as redis-benchmark reports it, measured from its scheduled
	// send time when the load is paced. Max is the longest; under a paced
	// load it bounds from below the longest time the server answered no
	// one (a stall of d delays the replies due during it by up to d).
	P50, P99, P999, Max time.Duration
	// Seconds is, with Config.PerSecond, each second of the run from its
	// start: a stall shows as a second with few replies, or as seconds
	// whose longest latency is the stall's length.
	Seconds []Second
}

// Rate is commands answered per second.
func (r Result) Rate() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// withDefaults fills in what cfg leaves unset: one client, no pipelining,
// 100,000 uniformly drawn keys.
func (cfg Config) withDefaults() Config {
	if cfg.Clients <= 0 {
		cfg.Clients = 1
	}
	if cfg.Pipeline <= 0 {
		cfg.Pipeline = 1
	}
	if cfg.Keys <= 0 {
		cfg.Keys = 100000
	}
	if cfg.Source == nil && cfg.Key == nil {
		keys := uint64(cfg.Keys)
		cfg.Source = func(rng *rand.Rand) func() uint64 { return keyspace.Uniform.Source(rng, keys) }
	}
	return cfg
}

// Run sends the load and waits for every reply.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if cfg.Requests <= 0 && cfg.Duration <= 0 {
		return Result{}, errors.New("loadgen: set Requests or Duration")
	}
	var (
		remaining atomic.Int64
		deadline  time.Time
		wg        sync.WaitGroup
		mu        sync.Mutex
		res       Result
		hist      latency.Histogram
		firstErr  error
	)
	remaining.Store(int64(cfg.Requests))
	start := time.Now()
	if cfg.Requests <= 0 {
		deadline = start.Add(cfg.Duration)
	}
	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(cfg.Pipeline) * float64(cfg.Clients) / cfg.Rate)
	}
	for c := range cfg.Clients {
		wg.Go(func() {
			w := newWorker(cfg, c)
			w.start = start
			if interval > 0 {
				// Spread the clients' first sends over one interval.
				w.interval = interval
				w.due = start.Add(interval * time.Duration(c) / time.Duration(cfg.Clients))
			}
			err := w.run(ctx, &remaining, deadline)
			if err != nil && ctx.Err() != nil {
				// A cancelled load fails on its cut connection; say why.
				err = ctx.Err()
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("client %d: %w", c, err)
			}
			res.Ops += w.ops
			res.Errors += w.errs
			hist.Merge(w.lat)
			for i, s := range w.seconds {
				if i == len(res.Seconds) {
					res.Seconds = append(res.Seconds, Second{})
				}
				res.Seconds[i].Ops += s.Ops
				res.Seconds[i].Max = max(res.Seconds[i].Max, s.Max)
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.P50 = hist.Quantile(0.50)
	res.P99 = hist.Quantile(0.99)
	res.P999 = hist.Quantile(0.999)
	res.Max = hist.Max()
	return res, firstErr
}

// command is how a worker frames each command around its key: the
// header before the key, the rest after it.
type command struct{ header, trailer []byte }

// newCommand frames INCR key, or HINCRBY hash key 1 when hash is set.
func newCommand(hash string) command {
	if hash == "" {
		return command{header: resp.AppendBulkString(resp.AppendArrayHeader(nil, 2), "INCR")}
	}
	h := resp.AppendBulkString(resp.AppendArrayHeader(nil, 4), "HINCRBY")
	return command{header: resp.AppendBulkString(h, hash), trailer: resp.AppendBulkString(nil, "1")}
}

// append appends the command for key.
func (c command) append(b []byte, key string) []byte {
	return append(resp.AppendBulkString(append(b, c.header...), key), c.trailer...)
}

// appendIndex appends the command for the key keyspace.Name(i) without
// building the key as a string.
func (c command) appendIndex(b []byte, i uint64) []byte {
	var name [len(keyspace.Prefix) + 20]byte // 20: len("18446744073709551615")
	return append(resp.AppendBulk(append(b, c.header...), keyspace.AppendName(name[:0], i)), c.trailer...)
}
