package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/counterd/counterd/internal/bench/latency"
	"github.com/counterd/counterd/internal/resp"
)

// timerSlack is how early a paced client may send: Go's timers round
// sub-millisecond waits up to a millisecond on Linux, so a client that
// slept until the due time would charge that to the server.
const timerSlack = time.Millisecond

// maxRounds bounds one connection's pipelines whatever the clock says.
const maxRounds = 1 << 32

// worker is one connection's loop. Everything it needs per command is
// allocated once in newWorker.
type worker struct {
	cfg  Config
	cmd  command
	id   int
	rng  *rand.Rand
	next func() uint64
	ops  int64
	errs int64
	lat  *latency.Histogram

	// interval is the pacing between pipelines (0: as fast as replies
	// come); next is when the following pipeline is due.
	interval time.Duration
	due      time.Time

	// start is the run's; seconds, with Config.PerSecond, counts each
	// second's commands and longest latency, by when a pipeline was sent
	// (or due).
	start   time.Time
	seconds []Second
}

func newWorker(cfg Config, id int) *worker {
	w := &worker{cfg: cfg, cmd: newCommand(cfg.Hash), id: id, rng: rand.New(rand.NewPCG(uint64(id), 42^cfg.Seed)), lat: new(latency.Histogram)}
	if cfg.PerSecond {
		// Room for the whole run, so recording never allocates.
		w.seconds = make([]Second, 0, int(cfg.Duration/time.Second)+2)
	}
	if cfg.Source != nil {
		w.next = cfg.Source(w.rng)
	}
	return w
}

func (w *worker) run(ctx context.Context, remaining *atomic.Int64, deadline time.Time) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, w.cfg.Network, w.cfg.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	var timer *time.Timer
	if w.interval > 0 {
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	rd := bufio.NewReaderSize(conn, 64<<10)
	buf := make([]byte, 0, 64<<10)
	for i, rounds := 0, 0; rounds < maxRounds; rounds++ {
		if w.past(deadline) {
			return nil
		}
		if err := w.pace(ctx, timer); err != nil {
			return err
		}
		n := w.batch(remaining, deadline)
		if n <= 0 {
			return nil
		}
		buf = w.fill(buf[:0], n, &i)
		if err := w.roundTrip(conn, rd, buf, n); err != nil {
			return err
		}
	}
	return nil
}

// past reports whether a timed run is over: its deadline passed, or, at a
// fixed rate, the next send would be due after it.
func (w *worker) past(deadline time.Time) bool {
	return !deadline.IsZero() && (time.Now().After(deadline) || (w.interval > 0 && !w.due.Before(deadline)))
}

// pace waits, at a fixed rate, until the next send is due.
func (w *worker) pace(ctx context.Context, timer *time.Timer) error {
	if w.interval <= 0 {
		return nil
	}
	wait := time.Until(w.due) - timerSlack
	if wait <= 0 {
		return nil
	}
	timer.Reset(wait)
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// batch is how many commands the next pipeline sends: Pipeline, or, for
// a run bounded by count, what is left of it.
func (w *worker) batch(remaining *atomic.Int64, deadline time.Time) int {
	n := w.cfg.Pipeline
	if deadline.IsZero() {
		if left := remaining.Add(-int64(n)); left < 0 {
			n += int(left)
		}
	}
	return n
}

// fill appends n commands to buf; *i counts commands across pipelines.
func (w *worker) fill(buf []byte, n int, i *int) []byte {
	for range n {
		if w.next != nil {
			buf = w.cmd.appendIndex(buf, w.next())
		} else {
			buf = w.cmd.append(buf, w.cfg.Key(w.rng, w.id, *i))
		}
		*i++
	}
	return buf
}

// roundTrip sends one pipeline, reads its n replies and records its
// latency.
func (w *worker) roundTrip(conn net.Conn, rd *bufio.Reader, buf []byte, n int) error {
	t0 := time.Now()
	if w.interval > 0 {
		// Late: charge the delay from the due time. Early (within
		// timerSlack): time the round trip only.
		if w.due.Before(t0) {
			t0 = w.due
		}
		w.due = w.due.Add(w.interval)
	}
	if _, err := conn.Write(buf); err != nil {
		return err
	}
	ops := w.ops
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
	took := time.Since(t0)
	w.lat.Record(took)
	if w.cfg.PerSecond {
		w.record(t0, w.ops-ops, took)
	}
	return nil
}

// record counts ops commands sent at t0 that took took in their second.
func (w *worker) record(t0 time.Time, ops int64, took time.Duration) {
	i := max(int(t0.Sub(w.start)/time.Second), 0)
	for len(w.seconds) <= i {
		w.seconds = append(w.seconds, Second{})
	}
	w.seconds[i].Ops += ops
	w.seconds[i].Max = max(w.seconds[i].Max, took)
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
		n, ok := resp.ParseInt(line[1 : len(line)-2])
		if !ok || n < -1 {
			return false, fmt.Errorf("bad bulk header %q", line)
		}
		if n >= 0 {
			if _, err := rd.Discard(int(n) + 2); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	return false, fmt.Errorf("unexpected reply %q", line)
}
