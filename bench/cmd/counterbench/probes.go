package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

const (
	// probeEvery spaces the probes: 20 a second in all, whatever the
	// number of daemons they take turns on, a load too small to count.
	probeEvery = 50 * time.Millisecond
	// probeMost bounds the probes of one cell (50 s of load).
	probeMost = 1000
	// pollEvery is how often the poller asks SQL for the probes it
	// waits for: the resolution of the staleness it measures.
	pollEvery = 50 * time.Millisecond
	// fleetProbeTimeout bounds the wait, after everything was committed,
	// for the last probes to show.
	fleetProbeTimeout = time.Minute
)

// probes measures how long increments take to show in SQL: a sender
// sends probe increments one at a time, each to a key of its own, and
// records when each was acknowledged; a poller asks SQL every pollEvery
// which of those still awaited show, and records for each the time from
// its acknowledgement to the poll that first returned it.
type probes struct {
	prefix  string
	send    func(ctx context.Context, i int, key string) error
	visible func(ctx context.Context, keys []string) ([]string, error)

	stop, sent, give chan struct{}
	stopOnce         sync.Once
	polled           chan struct{}

	mu      sync.Mutex
	acked   map[string]time.Time
	delays  []time.Duration
	n       int
	sendErr error
	pollErr error
}

// startProbes starts sending probes named prefix0, prefix1, ... with
// send (the first at once), and polling for them with visible.
func startProbes(ctx context.Context, prefix string, send func(ctx context.Context, i int, key string) error,
	visible func(ctx context.Context, keys []string) ([]string, error)) *probes {
	p := &probes{prefix: prefix, send: send, visible: visible, acked: map[string]time.Time{},
		stop: make(chan struct{}), sent: make(chan struct{}), give: make(chan struct{}), polled: make(chan struct{})}
	go p.sender(ctx)
	go p.poller(ctx)
	return p
}

func (p *probes) sender(ctx context.Context) {
	defer close(p.sent)
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for i := range probeMost {
		key := p.prefix + strconv.Itoa(i)
		err := p.send(ctx, i, key)
		at := time.Now()
		p.mu.Lock()
		if err != nil {
			p.sendErr = fmt.Errorf("probe %s: %w", key, err)
			p.mu.Unlock()
			return
		}
		p.acked[key] = at
		p.n++
		p.mu.Unlock()
		select {
		case <-p.stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *probes) poller(ctx context.Context) {
	defer close(p.polled)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.give:
			return
		case <-tick.C:
		}
		p.mu.Lock()
		keys := make([]string, 0, len(p.acked))
		for k := range p.acked {
			keys = append(keys, k)
		}
		p.mu.Unlock()
		if len(keys) == 0 {
			select {
			case <-p.sent:
				return // nothing more will come
			default:
				continue
			}
		}
		at := time.Now()
		shown, err := p.visible(ctx, keys)
		p.mu.Lock()
		if err != nil {
			p.pollErr = fmt.Errorf("poll for probes: %w", err)
			p.mu.Unlock()
			return
		}
		for _, k := range shown {
			if t, ok := p.acked[k]; ok {
				p.delays = append(p.delays, max(at.Sub(t), 0))
				delete(p.acked, k)
			}
		}
		p.mu.Unlock()
	}
}

// stopSending stops the sender and waits for the probe under way.
func (p *probes) stopSending() {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.sent
}

// wait returns, once every probe sent has shown, each one's delay and how
// many were acknowledged; an error when one failed or some did not show
// within timeout. Call it after stopSending.
func (p *probes) wait(ctx context.Context, timeout time.Duration) ([]time.Duration, int, error) {
	select {
	case <-p.polled:
	case <-time.After(timeout):
		p.abandon()
	case <-ctx.Done():
		p.abandon()
		return nil, 0, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.sendErr != nil:
		return nil, 0, p.sendErr
	case p.pollErr != nil:
		return nil, 0, p.pollErr
	case len(p.acked) > 0:
		return nil, 0, fmt.Errorf("%d of %d probes acknowledged did not show in SQL within %v of the drain", len(p.acked), p.n, timeout)
	}
	return p.delays, p.n, nil
}

// abandon stops the poller and waits for it.
func (p *probes) abandon() {
	select {
	case <-p.give:
	default:
		close(p.give)
	}
	<-p.polled
}
