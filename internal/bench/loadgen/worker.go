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
}

func newWorker(cfg Config, id int) *worker {
	w := &worker{cfg: cfg, id: id, rng: rand.New(rand.NewPCG(uint64(id), 42^cfg.Seed)), lat: new(latency.Histogram)}
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
		if !deadline.IsZero() && (time.Now().After(deadline) || (w.interval > 0 && !w.due.Before(deadline))) {
			return nil
		}
		if w.interval > 0 {
			if wait := time.Until(w.due) - timerSlack; wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		n := w.cfg.Pipeline
		if deadline.IsZero() {
			left := remaining.Add(-int64(n))
			if left < 0 {
				n += int(left)
			}
			if n <= 0 {
				return nil
			}
		}
		buf = buf[:0]
		for range n {
			if w.next != nil {
				buf = appendIndexIncr(buf, w.next())
			} else {
				buf = appendIncr(buf, w.cfg.Key(w.rng, w.id, i))
			}
			i++
		}
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
		w.lat.Record(time.Since(t0))
	}
	return nil
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
