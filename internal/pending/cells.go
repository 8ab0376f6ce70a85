package pending

import (
	"strings"

	"github.com/counterd/counterd/internal/change"
)

// cell is one counter's net pending change in one shard.
type cell struct {
	// Net is what the round writes for the counter: the changes accepted
	// for it netted by change.Fold (set.go).
	change.Net
	// tent is N as the group under check would leave it, valid while
	// stamp is its shard's current group.
	tent  int64
	stamp uint64
	// big says the counter's net change may pass the per-shard bound, so
	// every change to it takes the exclusive path (see shard.go); only
	// shard 0's cell of a big counter holds a value.
	big bool
}

// cells maps counters to their cells. The plain kind's cell of a key
// (change.Plain, its total), by far the most common counter, is keyed by
// the key alone: hashing a string is much cheaper than hashing a
// change.ID, and the map entry is smaller.
type cells struct {
	totals map[string]*cell
	other  map[change.ID]*cell
	slab   *cellSlab
}

// cellSlab hands out cells from chunks: a unique member is a cell of its
// own (change.Unique), so a round of PFADDs makes cells by the thousand,
// and one allocation per chunk instead of per cell keeps that cheap. A
// chunk lives as long as any of its cells, all of which go with their
// round.
type cellSlab struct{ free []cell }

// cellChunk is how many cells one allocation makes.
const cellChunk = 128

// next returns a zero cell.
func (sl *cellSlab) next() *cell {
	if len(sl.free) == 0 {
		sl.free = make([]cell, cellChunk)
	}
	c := &sl.free[0]
	sl.free = sl.free[1:]
	return c
}

// maxPresize bounds the room a new round's map is made with. Sizing it
// for the last round saves growing it again in a steady load, but a burst
// (a million distinct keys while PostgreSQL was away) must not make every
// later round start that large: maps never shrink, so the peak would be
// kept for good.
const maxPresize = 16 << 10

// presize is the room for a round after one of n keys.
func presize(n int) int { return min(n, maxPresize) }

// newCells returns empty cells with room for totals plain cells and other
// cells of other kinds.
func newCells(totals, other int) cells {
	return cells{totals: make(map[string]*cell, totals), other: make(map[change.ID]*cell, other), slab: &cellSlab{}}
}

// plainCell reports whether id is kept in cells.totals.
func plainCell(id change.ID) bool { return id.Kind == change.Plain() && id.Bucket == 0 }

func (cs cells) get(id change.ID) *cell {
	if plainCell(id) {
		return cs.totals[id.Key]
	}
	return cs.other[id]
}

// Lookup returns the net of id's cell, nil if there is none: where
// change.Fold finds the cells a change cancels.
func (cs *cells) Lookup(id change.ID) *change.Net {
	if c := cs.get(id); c != nil {
		return &c.Net
	}
	return nil
}

// add inserts a new cell for id, copying its key. id must have none: a
// second would drop what the first holds.
func (cs cells) add(id change.ID) *cell {
	id.Key = strings.Clone(id.Key) // it may alias a buffer the caller reuses
	return cs.addOwned(id)
}

// addOwned is add for an id whose key nothing else changes: it is kept
// as it is.
func (cs cells) addOwned(id change.ID) *cell {
	c := cs.slab.next()
	n := cs.len()
	if plainCell(id) {
		cs.totals[id.Key] = c
	} else {
		cs.other[id] = c
	}
	if cs.len() == n {
		panic("BUG: a second cell for one counter")
	}
	return c
}

// remove deletes id's cell.
func (cs cells) remove(id change.ID) {
	if plainCell(id) {
		delete(cs.totals, id.Key)
	} else {
		delete(cs.other, id)
	}
}

func (cs cells) len() int { return len(cs.totals) + len(cs.other) }

// each calls fn for every counter.
func (cs cells) each(fn func(id change.ID, c *cell)) {
	plain := change.Plain()
	for k, c := range cs.totals {
		fn(change.ID{Key: k, Kind: plain}, c)
	}
	for id, c := range cs.other {
		fn(id, c)
	}
}

// parts is a round's cells, one per shard, shard 0 first. A counter's
// net change is the merge of its cells in every part: see merge.
type parts []cells

// get returns the merge of id's cells in every part, and whether any part
// has one.
func (ps parts) get(id change.ID) (cell, bool) {
	var m cell
	found := false
	for _, cs := range ps {
		if c := cs.get(id); c != nil {
			m.merge(c)
			found = true
		}
	}
	return m, found
}

// len is an upper bound of the counters in ps.
func (ps parts) len() int {
	n := 0
	for _, cs := range ps {
		n += cs.len()
	}
	return n
}

// merge adds o, a cell of the same counter in another shard, to c. Only
// shard 0 holds cells of changes that do not add up (see exclusive), and
// the exclusive path empties every other shard's cell of a counter when
// it changes it so, so what other shards hold was accepted after and adds
// to it: the merged net is written as the kind that does not add up, if
// either is. The shards' bound keeps the sum within int64 (see shard.go).
func (c *cell) merge(o *cell) {
	n, ok := addChecked(c.N, o.N)
	if !ok {
		panic("BUG: a counter's cells over all shards pass int64")
	}
	c.N, c.V = n, c.V+o.V
	if c.Kind == 0 || !o.Kind.Additive() {
		c.Kind = o.Kind
	}
}
