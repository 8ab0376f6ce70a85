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
//
// The goroutine sleeps once nobody has read the clock for idleTicks ticks:
// ticking every 3.9 ms kept an idle daemon at 2-3% of a core, and a fleet
// runs a daemon beside every app server. A read of a sleeping clock takes
// the system clock and wakes the goroutine.
type clock struct {
	fake   func() time.Time // the injected clock, or nil
	origin time.Time
	stop   chan struct{}
	done   chan struct{}
	wake   chan struct{}
	once   sync.Once

	_      [cacheLine]byte
	coarse atomic.Int64 // the real clock as of the last tick; stopped or asleep once not ticking
	read   atomic.Bool  // read since the last tick
	_      [cacheLine - 9]byte
}

// The coarse value when the goroutine is not ticking.
const (
	stopped = -1
	asleep  = -2
)

// idleTicks is how many ticks without a read put the clock to sleep
// (about 250 ms at the default resolution).
const idleTicks = 64

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
	k.wake = make(chan struct{}, 1)
	go k.run(resolution)
}

func (k *clock) run(resolution time.Duration) {
	defer close(k.done)
	t := time.NewTicker(resolution)
	defer t.Stop()
	unread := 0
	for {
		select {
		case <-t.C:
			if k.read.Swap(false) {
				unread = 0
			} else if unread++; unread >= idleTicks {
				k.coarse.Store(asleep)
				t.Stop()
				select {
				case <-k.wake:
				case <-k.stop:
					k.coarse.Store(stopped)
					return
				}
				unread = 0
				t.Reset(resolution)
			}
			k.coarse.Store(int64(time.Since(k.origin)))
		case <-k.stop:
			k.coarse.Store(stopped)
			return
		}
	}
}

// now returns the time in nanoseconds since the clock started.
func (k *clock) now() int64 {
	if k.fake != nil {
		return int64(k.fake().Sub(k.origin))
	}
	t := k.coarse.Load()
	if t >= 0 {
		if !k.read.Load() { // a load, not a store, on the hot path
			k.read.Store(true)
		}
		return t
	}
	if t == asleep {
		select {
		case k.wake <- struct{}{}:
		default: // already woken
		}
	}
	return int64(time.Since(k.origin)) // stopped or asleep: read the real clock
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
