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
// clients: at 50,000 unpipelined INCR/s, p99 was lower with this rule in
// 6 of 6 alternated runs (docs/performance.md, "Latency and stalls"), the
// committed rate unchanged within noise. So a batch is split only
// when someone waits on it (store.Urgent: FLUSH, COUNTERD_ACK=commit,
// shutdown) or the store is behind: when the previous batch's write took
// at least half the time from its start to this one's, that is,
// PostgreSQL is busy writing rounds more than half the time, the same
// duty cycle at which the flusher's pacer (pending/pace.go) grows rounds.

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
// less than half the time since it started. Before any write it is
// behind, so a first batch (often a replay of a backlog) is split.
func keepsUp(last time.Time, took time.Duration, now time.Time) bool {
	if last.IsZero() {
		return false
	}
	return 2*took < now.Sub(last)
}
