package pending

import (
	"math"
	"sync"

	"github.com/counterd/counterd/internal/change"
)

// Shards: the accept path without a global lock.
//
// The accumulating round is split into shards, each with its own cells and
// its own lock. Shard 0 serves every caller without a shard of its own
// (goroutine-per-connection serving, MULTI/EXEC, SET); each event loop of
// the server gets one of the others (Buffer.Shard), so its lock is taken
// once per loop pass and nobody else wants it except a cut, a read, or the
// exclusive path below. A group's check, journal append and fold run
// under its shard's lock alone: two loops accept at once, and their
// journal writes meet only in the journal's own lock around write(2),
// which the file's single append offset serialises anyway.
//
// A cut takes every shard's lock, in index order, rotates the journal and
// takes each shard's cells as one part of the round: every record of a
// segment is folded into exactly that segment's round, as with one lock.
// Reads take every lock the same way, so each round is seen once. Taking
// the loops' locks is the "cut handed to every loop": a loop finishes its
// pass's group, then the cut runs, with no loop woken for it.
//
// One counter may have a cell in several shards; the round merges them
// (cell.merge). Two rules keep that exact:
//
//   - Bound. A shard's cell never passes ±bound = MaxInt64/len(shards) on
//     the fast path, so the merged sum always fits int64, which is what
//     overflow refusal promised when there was one map. A change that
//     would pass it, a change to a counter marked big, a key new to the
//     shard while the pending-key limit is reached, and every change
//     that does not add up or cancels other cells (SET, DEL, EXPIRE:
//     see exclusive) take the exclusive path instead.
//   - Exclusive path. It takes every shard's lock, moves the counter's
//     cells from the other shards into shard 0's (consolidate), and
//     checks and folds there, exactly as the single map did: so SET
//     replaces what every shard held before it, overflow is checked
//     against the true sum, and a key pending in another shard is not
//     refused as new at the pending-key limit. A cell of shard 0 left past the bound is marked big in every
//     shard, so later changes to it come back here. It is rare: int64
//     edges, the key limit and reset commands.
//
// A group that meets such a change mid-way is accepted in pieces (see
// Accumulator.add): the changes before it on the fast path, it on the
// exclusive path, then the rest, each piece one journal record, so the
// replies are those of accepting the changes one after another.
//
// The pending-key limit counts cells: a key new to a shard reserves one
// atomically at check time (reserveKey), so shards checking at once cannot
// pass the limit together, and a key two shards hold counts twice until
// an exclusive step merges it. So near the limit a new key may be refused
// a little earlier than one map would; every other reply is the same.
type shard struct {
	mu    sync.Mutex
	cells cells

	// Scratch of the group under check, reused so a group does not
	// allocate.
	group    uint64  // stamps cells a group under check has touched
	found    []*cell // per accepted change, its cell (nil or heldEarlier if new: see check)
	fresh    map[change.ID]int64
	accepted []change.Change
	expanded []change.Change // one item and its bucket changes
	undo     []undoEntry
	reserved int64  // keys the group under check reserved (reserveKey)
	rec      []byte // the group's journal record, encoded outside the journal's lock

	// sets are the unique sets (a key's members of one kind) the
	// accumulating round holds in this shard: newCell counts each once.
	sets map[change.ID]string // to the set's copy of its key
}

// maxKeptRecord stops one huge record from pinning its buffer forever.
const maxKeptRecord = 1 << 20

// maxKeptScratch is the most changes of one group a shard keeps scratch
// room for: a burst's group (a loop pass over many pipelining
// connections, a large MULTI) does not pin its maps and slices forever.
const maxKeptScratch = 16 << 10

// resetFresh empties the scratch map of a group of n items, replacing it
// rather than clearing it when it grew large: clearing keeps a map's room.
func (s *shard) resetFresh(n int) {
	if n > maxKeptScratch {
		s.fresh = make(map[change.ID]int64)
		return
	}
	clear(s.fresh)
}

// trimScratch drops scratch slices a large group grew.
func (s *shard) trimScratch() {
	if cap(s.accepted) > maxKeptScratch {
		s.accepted, s.found = nil, nil
	}
}

// encode encodes acc as one journal record in the shard's own buffer,
// so only the write(2) runs under the journal's lock.
func (s *shard) encode(jr Journal, acc []change.Change) ([]byte, error) {
	rec, err := jr.Encode(s.rec[:0], acc)
	if cap(rec) <= maxKeptRecord {
		s.rec = rec[:0]
	}
	return rec, err
}

func newShard() *shard {
	return &shard{cells: newCells(0, 0), fresh: make(map[change.ID]int64), sets: make(map[change.ID]string)}
}

// Shard is one event loop's part of the accept path: AddGroup through it
// takes only its shard's lock (see shard.go).
type Shard struct {
	a *Accumulator
	s *shard
}

// AddGroup is Accumulator.AddGroup on the shard.
func (h Shard) AddGroup(items []change.Change, errs []error) (Ticket, error) {
	return h.a.add(h.s, items, errs, false)
}

// boundFor is the fast path's bound on a cell with n shards.
func boundFor(n int) int64 { return math.MaxInt64 / int64(n) }

// lockAll takes every shard's lock in index order.
func (a *Accumulator) lockAll() {
	for _, s := range a.shards {
		s.mu.Lock()
	}
}

func (a *Accumulator) unlockAll() {
	for _, s := range a.shards {
		s.mu.Unlock()
	}
}

// outside reports whether n is past the fast path's bound.
func (a *Accumulator) outside(n int64) bool { return n > a.bound || n < -a.bound }

// consolidate moves id's cells in the other shards into shard 0's, which
// it creates if needed, and returns it (nil when no shard has the
// counter). The moved cells are removed, so the counter counts once
// against the pending-key limit. The caller holds every lock. Within a group the first touch
// of a counter consolidates it, so a later one finds the others empty and
// the tentative sum stamped on shard 0's cell stays valid.
func (a *Accumulator) consolidate(id change.ID) *cell {
	home := a.shards[0]
	c := home.cells.get(id)
	for _, s := range a.shards[1:] {
		o := s.cells.get(id)
		if o == nil || o.big {
			continue // a big counter's value is in shard 0 already
		}
		if c == nil {
			c = a.addCell(home, id)
		}
		c.merge(o)
		s.cells.remove(id)
		a.keys.Add(-1)
	}
	if c != nil && !c.big && a.outside(c.N) {
		a.markBig(id, c)
	}
	return c
}

// markBig marks id big in every shard, c being shard 0's cell, which
// holds the counter's whole value (consolidate emptied the others). The
// markers in other shards hold nothing and are not counted as pending
// keys. The caller holds every lock.
func (a *Accumulator) markBig(id change.ID, c *cell) {
	c.big = true
	for _, s := range a.shards[1:] {
		o := s.cells.get(id)
		if o == nil {
			o = s.cells.add(id)
		}
		o.big = true
	}
}

// addCell adds a cell for id to s, counting it as pending; it holds what
// cells of other shards held, whose rows newCell counted already.
func (a *Accumulator) addCell(s *shard, id change.ID) *cell {
	c := s.cells.add(id)
	a.keys.Add(1)
	return c
}

// parts returns the accumulating round's cells, shard by shard. The
// caller holds every lock.
func (a *Accumulator) parts() parts {
	ps := make(parts, len(a.shards))
	for i, s := range a.shards {
		ps[i] = s.cells
	}
	return ps
}
