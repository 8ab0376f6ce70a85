package pending

import (
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/slots"
)

// round is one batch on its way to the store. Its maps are not changed
// once it is cut.
type round struct {
	id    slots.BatchID
	parts parts // one per shard
	// recovered says the round was replayed from the journal of an
	// earlier run, which may have committed it already.
	recovered bool
	// attempts counts writes tried; flusher goroutine only.
	attempts int
}

// batch lists the round's changes that do something, a counter's cells
// in every part merged into one change.
func (r *round) batch() []change.Change {
	batch := make([]change.Change, 0, r.parts.len())
	if len(r.parts) == 1 {
		r.parts[0].each(func(id change.ID, c *cell) {
			if ch, ok := c.change(id); ok {
				batch = append(batch, ch)
			}
		})
		return batch
	}
	merged := newCells(r.parts.len())
	for _, cs := range r.parts {
		cs.each(func(id change.ID, c *cell) {
			m := merged.get(id)
			if m == nil {
				m = merged.add(id)
			}
			m.merge(c)
		})
	}
	merged.each(func(id change.ID, c *cell) {
		if ch, ok := c.change(id); ok {
			batch = append(batch, ch)
		}
	})
	return batch
}

// Recovered is a round replayed from the journal at start.
type Recovered struct {
	ID      slots.BatchID
	Changes []change.Change
}
