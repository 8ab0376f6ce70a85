package slots

import (
	"sync"
	"time"
)

// Spreading a batch over transactions. Several transactions at once let
// PostgreSQL write a round on several cores, which only pays when
// PostgreSQL is the bottleneck. While it keeps up, they only make its
// work burstier: on a server that shares the daemon's cores (the sidecar
// next to a small database, every benchmark on one machine) two backends
// writing a round at once took both cores from the event loop and its
// clients. So a batch is split only when someone waits on it
// (store.Urgent: FLUSH, COUNTERD_ACK=commit, shutdown) or the store is
// behind: when the previous batch's write took at least nine tenths of the
// time from its start to this one's, that is, rounds are written back to
// back and PostgreSQL never rests.
//
// Measured on 2 cores at 50,000 unpipelined INCR/s (docs/performance.md,
// "Latency and stalls"): splitting at half the time, the pacer's threshold
// for growing rounds, split every round there (its write took 0.5-0.9 s of
// each 1 s round), and p99 was 9.4-33.8 ms; one transaction a round kept
// up and p99 was 3.8-7.9 ms, lower in 3 of 3 alternated runs. Splitting
// at half the time was itself a step from splitting every round over
// 2,000 keys (p99 lower in 6 of 6 pairs at that rate).

// spread remembers the last batch's write, to decide the next one's
// split.
type spread struct {
	always bool // Options.SplitAlways

	mu        sync.Mutex
	lastStart time.Time
	lastTook  time.Duration
}

// writers returns how many transactions a batch of keys starting at now
// is split into, with at most max: one per minKeysPerWriter keys, and
// only one while the store keeps up unless the batch is urgent.
func (sp *spread) writers(max, keys int, now time.Time, urgent bool) int {
	n := min(max, 1+keys/minKeysPerWriter)
	if n == 1 || sp.always || urgent {
		return n
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if keepsUp(sp.lastStart, sp.lastTook, now) {
		return 1
	}
	return n
}

// wrote records a batch's write that started at start and took took.
func (sp *spread) wrote(start time.Time, took time.Duration) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.lastStart, sp.lastTook = start, took
}

// keepsUp reports whether the store kept up before a batch starting at
// now: the previous write (which started at last and took took) was busy
// less than nine tenths of the time since it started. Before any write it
// is behind, so a first batch (often a replay of a backlog) is split.
func keepsUp(last time.Time, took time.Duration, now time.Time) bool {
	if last.IsZero() {
		return false
	}
	return 10*took < 9*now.Sub(last)
}
