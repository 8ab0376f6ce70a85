package pending

import (
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/slots"
)

// cell is one counter's net pending change.
type cell struct {
	n int64
	v float64 // variance of the sampled increments in n
}

// round is one batch on its way to the store. Its maps are not changed
// once it is cut.
type round struct {
	id     slots.BatchID
	shards []map[change.ID]*cell
	// recovered says the round was replayed from the journal of an
	// earlier run, which may have committed it already.
	recovered bool
	// attempts counts writes tried; flusher goroutine only.
	attempts int
}

// batch lists the round's changes that do something.
func (r *round) batch() []change.Change {
	var n int
	for _, m := range r.shards {
		n += len(m)
	}
	batch := make([]change.Change, 0, n)
	for _, m := range r.shards {
		for id, c := range m {
			if c.n != 0 || c.v != 0 {
				batch = append(batch, change.Change{Key: id.Key, Kind: id.Kind, Bucket: id.Bucket, Delta: c.n, Var: c.v})
			}
		}
	}
	return batch
}

// Recovered is a round replayed from the journal at start.
type Recovered struct {
	ID      slots.BatchID
	Changes []change.Change
}
