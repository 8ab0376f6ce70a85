package pending

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// round is one batch on its way to the store. Its maps are not changed
// once it is cut.
type round struct {
	id    store.BatchID
	parts parts // one per shard
	// recovered says the round was replayed from the journal of an
	// earlier run, which may have committed it already.
	recovered bool
	// attempts counts writes tried, timeouts those that ran out of their
	// deadline; written by the flusher goroutine under Flusher.mu (Ready
	// reads attempts).
	attempts, timeouts int
	// queuedAt is when the round was queued (cut, or replayed at start).
	queuedAt time.Time
	// outcomes are those of the round's attempts that failed with part
	// of it committed (store.ApplyResult.Outcomes): the attempt that
	// completes it decides only the rest. Only the flusher goroutine
	// uses them.
	outcomes map[string]int64
}

// len is how many cells the round's parts hold: its changes, before a
// counter's cells in several parts are merged.
func (r *round) len() int {
	n := 0
	for _, cs := range r.parts {
		n += cs.len()
	}
	return n
}

// batch lists the round's changes that do something, a counter's cells
// in every part merged into one change. With one part holding cells (one
// event loop, and nothing through the shared shard) it reads that part's
// maps as they are; otherwise it lists every part's cells, sorts them by
// counter and merges neighbours, which costs less than a merged map (no
// key copies, no map growth).
func (r *round) batch() []change.Change {
	var full parts
	for _, cs := range r.parts {
		if cs.len() > 0 {
			full = append(full, cs)
		}
	}
	batch := make([]change.Change, 0, full.len())
	if len(full) <= 1 {
		for _, cs := range full {
			cs.each(func(id change.ID, c *cell) {
				if c.Written() {
					batch = append(batch, c.Change(id))
				}
			})
		}
		return batch
	}
	type entry struct {
		id change.ID
		c  *cell
	}
	all := make([]entry, 0, full.len())
	for _, cs := range full {
		cs.each(func(id change.ID, c *cell) { all = append(all, entry{id, c}) })
	}
	slices.SortFunc(all, func(x, y entry) int { return compareID(x.id, y.id) })
	for i := 0; i < len(all); {
		m := *all[i].c
		j := i + 1
		for ; j < len(all) && all[j].id == all[i].id; j++ {
			m.merge(all[j].c)
		}
		if m.Written() {
			batch = append(batch, m.Change(all[i].id))
		}
		i = j
	}
	return batch
}

// compareID orders counters by key, kind and bucket.
func compareID(x, y change.ID) int {
	return cmp.Or(strings.Compare(x.Key, y.Key), cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Bucket, y.Bucket))
}

// Recovered is a round replayed from the journal at start.
type Recovered struct {
	ID      store.BatchID
	Changes []change.Change
}
