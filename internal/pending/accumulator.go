package pending

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/windows"
)

// ErrBackoff is returned for a change to a new counter while too many are
// pending: the client should retry later.
var ErrBackoff = errors.New("too many pending keys, back off and retry")

// ErrOverflow is returned when a counter's pending delta would overflow
// int64.
var ErrOverflow = errors.New("increment or decrement would overflow")

// Journal is what the accumulator needs of the write-ahead journal.
type Journal interface {
	Append(items []change.Change) (journal.Position, error)
	Current() uint64
	Rotate() (closed uint64, rotated bool, err error)
	Seal() error
	Remove(seq uint64) error
	WaitDurable(ctx context.Context, pos journal.Position) error
	SyncsEachAppend() bool
}

// Accumulator coalesces accepted changes per counter until Cut.
type Accumulator struct {
	jr Journal
	id slots.Identity

	// mu orders "check, journal, fold" of each group against Cut and
	// against reads of the in-memory state, so every record of a segment
	// is in that segment's round and a read sees each round in exactly
	// one place. It guards everything below and is never held across a
	// database call.
	mu      sync.Mutex
	nextSeq uint64 // without a journal: the seq of the accumulating round
	cells   cells
	keys    atomic.Int64 // distinct counters in cells; read without mu

	// Group scratch, reused so AddGroup does not allocate.
	group    uint64  // stamps cells a group under check has touched
	found    []*cell // per accepted change, its cell (nil if new)
	fresh    map[change.ID]int64
	accepted []change.Change
	expanded []change.Change // one item and its bucket changes
	undo     []undoEntry

	// win, when not nil, expands each increment of a key with windows
	// into bucket changes stamped by clock (see check).
	win   *windows.Config
	clock *windows.Clock

	maxKeys    int64
	maxPending int64
	kick       func()
	queue      func(*round) // hands a cut round to the flusher, under mu
	m          *bufferMetrics
}

// cell is one counter's net pending change.
type cell struct {
	n int64
	v float64 // variance of the sampled increments in n
	// tent is n as the group under check would leave it, valid while
	// stamp is the accumulator's current group.
	tent  int64
	stamp uint64
	// set says n replaces the key's total rather than adding to it: a
	// SET or DEL, then any increments accepted after it (see fold). On
	// an Expire cell it says the cell is written even when n is 0.
	set bool
}

// cells maps counters to their cells. The all-time total of a key, by
// far the most common counter, is keyed by the key alone: hashing a string
// is much cheaper than hashing a change.ID, and the map entry is smaller.
type cells struct {
	totals map[string]*cell
	other  map[change.ID]*cell
}

func newCells(hint int) cells {
	return cells{totals: make(map[string]*cell, hint), other: make(map[change.ID]*cell)}
}

func (cs cells) get(id change.ID) *cell {
	if id.Kind == change.Total && id.Bucket == 0 {
		return cs.totals[id.Key]
	}
	return cs.other[id]
}

// add inserts a new cell for id, copying its key.
func (cs cells) add(id change.ID) *cell {
	c := &cell{}
	id.Key = strings.Clone(id.Key) // it may alias a buffer the caller reuses
	if id.Kind == change.Total && id.Bucket == 0 {
		cs.totals[id.Key] = c
	} else {
		cs.other[id] = c
	}
	return c
}

func (cs cells) len() int { return len(cs.totals) + len(cs.other) }

// each calls fn for every counter.
func (cs cells) each(fn func(id change.ID, c *cell)) {
	for k, c := range cs.totals {
		fn(change.ID{Key: k, Kind: change.Total}, c)
	}
	for id, c := range cs.other {
		fn(id, c)
	}
}

// seq is the sequence number the accumulating round will have, or a
// number above every round cut before it and not above its own (the
// journal may move past a broken segment before the cut, never after).
// The caller holds mu.
func (a *Accumulator) seq() uint64 {
	if a.jr != nil {
		return a.jr.Current()
	}
	return a.nextSeq
}

// Ticket says where an accepted group went: the journal position to wait
// on for fsync, and the round to wait on for commit.
type Ticket struct {
	Pos journal.Position
	Seq uint64
	// Recorded counts the changes that changed a pending delta; a group
	// whose increments were all sampled out has nothing to wait for.
	Recorded int
}

// AddGroup accepts a group of changes in three steps, so nothing ever has
// to be undone: it checks each (errs[i] gets ErrOverflow or ErrBackoff for
// one refused, taking earlier changes of the same group into account),
// appends the accepted ones to the journal as one record, and folds them
// into their counters' pending deltas. If the journal append fails,
// nothing of the group is accepted and the error is returned. len(errs)
// must be len(items). Keys may alias a buffer the caller reuses after the
// call.
func (a *Accumulator) AddGroup(items []change.Change, errs []error) (Ticket, error) {
	return a.add(items, errs, false)
}

// ErrNotAll is AddAll's refusal of a whole group because some of its
// changes were refused; errs says which and why.
var ErrNotAll = errors.New("a change of the group was refused, so none was accepted")

// AddAll accepts every change of items or none, as one journal record: a
// MULTI/EXEC transaction. If AddGroup would refuse any change, nothing is
// journaled or folded, errs says which changes and why, and the error is
// ErrNotAll; a journal failure is returned as by AddGroup.
func (a *Accumulator) AddAll(items []change.Change, errs []error) (Ticket, error) {
	return a.add(items, errs, true)
}

// add is AddGroup, or AddAll when all is set.
func (a *Accumulator) add(items []change.Change, errs []error, all bool) (Ticket, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	acc, accepted, refused := a.check(items, errs)
	var t Ticket
	if all && refused > 0 {
		// check only stamped tentative sums, which the next group's
		// stamp makes stale: there is nothing to undo.
		a.m.rejected.Add(accepted)
		return t, ErrNotAll
	}
	if len(acc) > 0 && a.jr != nil {
		pos, err := a.jr.Append(acc)
		if err != nil {
			a.m.rejected.Add(accepted)
			return t, err
		}
		t.Pos = pos
	}
	for i, ch := range acc {
		c := a.found[i]
		if c == nil {
			// New before this group; an earlier change of the group may
			// have created it since.
			id := cellID(ch)
			if c = a.cells.get(id); c == nil {
				c = a.cells.add(id)
				if a.keys.Add(1) == a.maxKeys {
					a.kick()
				}
			}
		}
		a.cells.fold(c, ch)
	}
	t.Seq = a.seq()
	t.Recorded = accepted
	a.m.accepted.Add(accepted)
	return t, nil
}

// check returns the changes of items that may be accepted, how many items
// that is and how many were refused, and leaves each accepted change's
// cell (nil for a counter not pending yet) in a.found. The caller holds
// mu, so nothing else changes the cells until it folds them.
func (a *Accumulator) check(items []change.Change, errs []error) (acc []change.Change, accepted, refused int) {
	if a.win != nil {
		return a.checkWindowed(items, errs)
	}
	// Without windows: the hot path, kept free of what windows need.
	acc, found := a.accepted[:0], a.found[:0]
	a.group++
	defer clear(a.fresh) // its keys alias the caller's buffer
	newKeys := int64(0)
	for i, ch := range items {
		errs[i] = nil
		if ch.Delta == 0 && ch.Var == 0 && !replaces(ch.Kind) {
			continue // sampled out, or INCRBY 0: nothing to record
		}
		id := cellID(ch)
		c := a.cells.get(id)
		var cur int64
		newKey := false
		switch {
		case c != nil:
			if c.stamp != a.group {
				c.stamp, c.tent = a.group, c.n
			}
			cur = c.tent
		default:
			var seen bool
			if cur, seen = a.fresh[id]; !seen && a.keys.Load()+newKeys >= a.maxPending {
				a.m.rejected.Inc()
				errs[i] = ErrBackoff
				refused++
				continue
			}
			newKey = !seen
		}
		sum, ok := addChecked(cur, ch.Delta)
		if replaces(ch.Kind) {
			sum, ok = ch.Delta, true // SET n, or an expiry time: nothing to add up
		}
		if !ok {
			a.m.rejected.Inc()
			errs[i] = ErrOverflow
			refused++
			continue
		}
		switch {
		case c != nil:
			c.tent = sum
		case len(items) > 1:
			a.fresh[id] = sum
		}
		if newKey {
			newKeys++
		}
		acc = append(acc, ch)
		found = append(found, c)
	}
	a.accepted, a.found = acc[:0], found // AddGroup reads found
	return acc, len(acc), refused
}

// checkWindowed is check with windows: each item is expanded into itself
// and its bucket changes, all stamped with one accept time, and accepted
// or refused together (a bucket's pending delta can overflow, or a new
// bucket counter pass MaxPendingKeys, when the total's does not).
func (a *Accumulator) checkWindowed(items []change.Change, errs []error) (acc []change.Change, accepted, refused int) {
	acc, found := a.accepted[:0], a.found[:0]
	a.group++
	defer clear(a.fresh) // its keys alias the caller's buffer
	newKeys := int64(0)
	at := a.clock.Now() // once per group, under mu: buckets follow journal order
	for i, ch := range items {
		errs[i] = nil
		if ch.Delta == 0 && ch.Var == 0 && !replaces(ch.Kind) {
			continue // sampled out, or INCRBY 0: nothing to record
		}
		a.expanded = a.win.Expand(append(a.expanded[:0], ch), ch, at)
		mark, undo := len(acc), a.undo[:0]
		var err error
		for _, sub := range a.expanded {
			var c *cell
			var u undoEntry
			if c, u, err = a.checkOne(sub, &newKeys); err != nil {
				break
			}
			undo = append(undo, u)
			acc = append(acc, sub)
			found = append(found, c)
		}
		if err != nil {
			// Take back the tentative sums of the item's changes checked
			// before the refused one.
			for j := len(undo) - 1; j >= 0; j-- {
				a.rollback(undo[j], &newKeys)
			}
			acc, found = acc[:mark], found[:mark]
			errs[i] = err
			refused++
		} else {
			accepted++
		}
		clear(undo)
		a.undo = undo[:0]
	}
	clear(a.expanded)
	a.accepted, a.found = acc[:0], found // AddGroup reads found
	return acc, accepted, refused
}

// undoEntry is what checkOne changed, so a refused item can take back the
// tentative sums of its changes checked before the refused one.
type undoEntry struct {
	c      *cell // the counter's cell, or nil for one in fresh
	prev   int64 // its tentative sum before
	id     change.ID
	seen   bool // id was in fresh before
	newKey bool
}

// checkOne checks one change against its counter's tentative sum and
// records the new sum, for checkWindowed.
func (a *Accumulator) checkOne(ch change.Change, newKeys *int64) (*cell, undoEntry, error) {
	id := cellID(ch)
	c := a.cells.get(id)
	u := undoEntry{c: c}
	var cur int64
	switch {
	case c != nil:
		if c.stamp != a.group {
			c.stamp, c.tent = a.group, c.n
		}
		cur = c.tent
	default:
		cur, u.seen = a.fresh[id]
		if !u.seen && a.keys.Load()+*newKeys >= a.maxPending {
			a.m.rejected.Inc()
			return nil, u, ErrBackoff
		}
		u.newKey = !u.seen
	}
	u.prev = cur
	sum, ok := addChecked(cur, ch.Delta)
	if replaces(ch.Kind) {
		sum, ok = ch.Delta, true // SET n, or an expiry time: nothing to add up
	}
	if !ok {
		a.m.rejected.Inc()
		return nil, u, ErrOverflow
	}
	switch {
	case c != nil:
		c.tent = sum
	default:
		a.fresh[id] = sum
		u.id = id
	}
	if u.newKey {
		*newKeys++
	}
	return c, u, nil
}

// rollback takes back what checkOne recorded for u.
func (a *Accumulator) rollback(u undoEntry, newKeys *int64) {
	switch {
	case u.c != nil:
		u.c.tent = u.prev
	case u.seen:
		a.fresh[u.id] = u.prev
	default:
		delete(a.fresh, u.id)
	}
	if u.newKey {
		*newKeys--
	}
}

// Cut swaps the cells out into a round, rotating the journal so the
// round's records are exactly its segments, and queues it. It reports
// false when nothing was accumulating, or when the journal could not
// rotate (the next Cut tries again).
func (a *Accumulator) Cut() (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.keys.Load() == 0 {
		return false, nil
	}
	var seq uint64
	if a.jr != nil {
		closed, rotated, err := a.jr.Rotate()
		if err != nil {
			return false, fmt.Errorf("rotate journal: %w", err)
		}
		if !rotated {
			panic("BUG: keys pending but the journal segment is empty")
		}
		seq = closed
	} else {
		seq = a.nextSeq
		a.nextSeq++
	}
	r := &round{id: slots.BatchID{Identity: a.id, Seq: seq}, cells: a.cells}
	a.cells = newCells(len(r.cells.totals))
	a.keys.Store(0)
	a.queue(r)
	return true, nil
}

// PendingKeys reports how many distinct counters wait for the next round.
func (a *Accumulator) PendingKeys() int { return int(a.keys.Load()) }

func addChecked(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}
