package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// load is a load generator that records, per key, every increment the
// daemon acknowledged and every one whose fate is unknown (sent, then the
// connection died before the reply).
type load struct {
	t      testing.TB
	socket string
	stop   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	acked   map[string]int64
	unknown map[string]int64
	refused int64 // error replies: not counted, and not expected unless a test says so
	ackN    atomic.Int64
	waiters []waiter

	upMu sync.Mutex
	up   chan struct{} // closed while the daemon is believed up
}

type waiter struct {
	n  int64
	ch chan struct{}
}

// startLoad runs clients goroutines, each sending pipelines of pipe INCRs
// over keys keys, until stop.
func startLoad(t *testing.T, socket string, clients, pipe, keys int) *load {
	t.Helper()
	l := &load{t: t, socket: socket, stop: make(chan struct{}), acked: map[string]int64{}, unknown: map[string]int64{}, up: make(chan struct{})}
	close(l.up)
	for i := range clients {
		l.wg.Go(func() { l.client(i, pipe, keys) })
	}
	t.Cleanup(l.halt)
	return l
}

func (l *load) client(id, pipe, keys int) {
	c := logTo(l.t, redis.NewClient(&redis.Options{
		Network: "unix", Addr: l.socket, Protocol: 2, DisableIdentity: true,
		MaxRetries:  -1, // a retry could count an increment twice
		DialTimeout: time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		PoolSize: 1,
	}))
	defer c.Close()
	ctx := context.Background()
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		p := c.Pipeline()
		cmds := make([]*redis.IntCmd, pipe)
		for j := range cmds {
			cmds[j] = p.Incr(ctx, fmt.Sprintf("post:%d", (id*7919+i*pipe+j)%keys))
		}
		_, _ = p.Exec(ctx)
		var acked, dialFailed int64
		l.mu.Lock()
		for _, cmd := range cmds {
			key := cmd.Args()[1].(string)
			var rerr redis.Error
			switch err := cmd.Err(); {
			case err == nil:
				l.acked[key]++
				acked++
			case errors.As(err, &rerr):
				l.refused++
			case isDialError(err):
				dialFailed++ // never sent
			default:
				l.unknown[key]++
			}
		}
		l.mu.Unlock()
		l.progress(acked)
		if dialFailed > 0 {
			select {
			case <-l.upChan():
			case <-l.stop:
				return
			}
		}
	}
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (l *load) progress(n int64) {
	total := l.ackN.Add(n)
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := l.waiters[:0]
	for _, w := range l.waiters {
		if total >= w.n {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	l.waiters = keep
}

// waitAcks blocks until n more increments are acknowledged (or fails the
// test after a minute).
func (l *load) waitAcks(t *testing.T, n int64) {
	t.Helper()
	ch := make(chan struct{})
	l.mu.Lock()
	l.waiters = append(l.waiters, waiter{n: l.ackN.Load() + n, ch: ch})
	l.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("load: %d more acknowledgements did not come within a minute", n)
	}
}

func (l *load) upChan() chan struct{} {
	l.upMu.Lock()
	defer l.upMu.Unlock()
	return l.up
}

// down tells clients that fail to dial to wait; upAgain releases them.
func (l *load) down() {
	l.upMu.Lock()
	l.up = make(chan struct{})
	l.upMu.Unlock()
}

func (l *load) upAgain() { close(l.upChan()) }

func (l *load) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}
