package hotness

import (
	"sync"
	"sync/atomic"
	"time"
)

// cacheLine pads fields written at different rates apart.
const cacheLine = 64

// clock is the classifier's time in nanoseconds since New. Reading the
// system clock costs 30-50 ns here (more than the rest of Observe), so the
// real clock is a coarse one: a goroutine stores the time every resolution
// and Observe loads it. An injected clock is read on every call.
type clock struct {
	fake   func() time.Time // the injected clock, or nil
	origin time.Time
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	_      [cacheLine]byte
	coarse atomic.Int64 // the real clock as of the last tick; -1 once stopped
	_      [cacheLine - 8]byte
}

// start begins the clock: injected, or coarse with the given resolution.
func (k *clock) start(fake func() time.Time, resolution time.Duration) {
	k.fake = fake
	if fake != nil {
		k.origin = fake()
		return
	}
	k.origin = time.Now()
	k.stop = make(chan struct{})
	k.done = make(chan struct{})
	go k.run(resolution)
}

func (k *clock) run(resolution time.Duration) {
	defer close(k.done)
	t := time.NewTicker(resolution)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			k.coarse.Store(int64(time.Since(k.origin)))
		case <-k.stop:
			k.coarse.Store(-1)
			return
		}
	}
}

// now returns the time in nanoseconds since the clock started.
func (k *clock) now() int64 {
	if k.fake != nil {
		return int64(k.fake().Sub(k.origin))
	}
	if t := k.coarse.Load(); t >= 0 {
		return t
	}
	return int64(time.Since(k.origin)) // stopped: read the real clock
}

// close stops the ticking goroutine and waits for it to exit; the clock
// reads the system clock from then on. Safe to call more than once.
func (k *clock) close() {
	if k.stop == nil {
		return
	}
	k.once.Do(func() { close(k.stop) })
	<-k.done
}
