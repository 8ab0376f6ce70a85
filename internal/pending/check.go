package pending

import (
	"errors"

	"github.com/counterd/counterd/internal/change"
)

// heldEarlier stands in s.found for a counter new to s whose cell an
// earlier change of the same group creates when the group is folded: the
// fold looks that one up, and creates the cell of a nil one without a
// lookup. It is never folded into.
var heldEarlier = new(cell)

// errExclusive stops a fast-path check at a change that needs every
// shard's lock (see shard.go); it never reaches a caller.
var errExclusive = errors.New("change needs the exclusive path")

// check returns the changes of items that may be accepted, how many items
// that is and how many were refused, and leaves each accepted change's
// cell in s.found: nil for a counter new to s at its first change in the
// group, heldEarlier at a later one. On the fast path (excl
// false) it stops at the first item that needs the exclusive path and
// returns its index as stop; items from stop on are not checked. With
// excl the caller holds every lock and s is shard 0; otherwise it holds
// s's. Nothing else changes the cells until the caller folds them.
func (a *Accumulator) check(s *shard, items []change.Change, errs []error, excl bool) (acc []change.Change, accepted, refused, stop int) {
	if a.win != nil {
		return a.checkWindowed(s, items, errs, excl)
	}
	// Without windows: the hot path, kept free of what windows need.
	acc, found := s.accepted[:0], s.found[:0]
	s.group++
	s.reserved = 0
	defer s.resetFresh(len(items)) // its keys alias the caller's buffer
	stop = len(items)
	// A group of one needs no tentative sum for a counter new to s: no
	// later change of the group can meet it.
	track := len(items) > 1
	var u undoEntry // not needed without windows
	for i, ch := range items {
		errs[i] = nil
		if idle(ch) {
			continue // nothing to record
		}
		var c *cell
		var err error
		if ch.Kind == change.Plain() {
			// checkOne, inline for the plain kind (an INCR), which adds
			// up on its own cell and cancels nothing.
			id := ch.ID()
			var cur int64
			var seen bool
			c, cur, seen = a.tentativeOf(s, id, excl)
			sum, ok := addChecked(cur, ch.Delta)
			err = a.admit(c, sum, ok, excl)
			if err == nil && c == nil && !seen {
				err = a.reserveNew(s, excl)
			}
			if err == nil {
				s.settle(c, id, sum, track)
				if c == nil && seen {
					c = heldEarlier
				}
			}
		} else {
			c, err = a.checkOne(s, ch, excl, track, &u)
		}
		if err == errExclusive {
			stop = i
			break
		}
		if err != nil {
			errs[i] = err
			refused++
			continue
		}
		acc = append(acc, ch)
		found = append(found, c)
	}
	s.accepted, s.found = acc[:0], found // add reads found
	return acc, len(acc), refused, stop
}

// reserveKey counts a key new to s against MaxPendingKeys, atomically, so
// shards checking at once cannot pass the limit together; it reports
// false, reserving nothing, at the limit. The reservation becomes the
// key's cell when the group is folded, and is given back (s.reserved) if
// the group is not.
func (a *Accumulator) reserveKey(s *shard) bool {
	if a.keys.Add(1) > a.maxPending {
		a.keys.Add(-1)
		return false
	}
	s.reserved++
	return true
}

// releaseKey gives back a key reserveKey counted for s.
func (a *Accumulator) releaseKey(s *shard) {
	a.keys.Add(-1)
	s.reserved--
}

// checkWindowed is check with windows: each item is expanded into itself
// and its bucket changes, all stamped with one accept time, and accepted
// or refused together (a bucket's pending delta can overflow, or a new
// bucket counter pass MaxPendingKeys, when the total's does not).
func (a *Accumulator) checkWindowed(s *shard, items []change.Change, errs []error, excl bool) (acc []change.Change, accepted, refused, stop int) {
	acc, found := s.accepted[:0], s.found[:0]
	s.group++
	s.reserved = 0
	defer s.resetFresh(len(items)) // its keys alias the caller's buffer
	at := a.clock.Now()            // once per group
	stop = len(items)
	for i, ch := range items {
		errs[i] = nil
		if idle(ch) {
			continue // sampled out, or INCRBY 0: nothing to record
		}
		s.expanded = a.win.Expand(append(s.expanded[:0], ch), ch, at)
		mark, undo := len(acc), s.undo[:0]
		var err error
		for _, sub := range s.expanded {
			var c *cell
			var u undoEntry
			if c, err = a.checkOne(s, sub, excl, true, &u); err != nil {
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
				a.rollback(s, undo[j])
			}
			acc, found = acc[:mark], found[:mark]
		}
		clear(undo)
		s.undo = undo[:0]
		switch {
		case err == errExclusive:
			stop = i
		case err != nil:
			errs[i] = err
			refused++
			continue
		default:
			accepted++
			continue
		}
		break
	}
	clear(s.expanded)
	s.accepted, s.found = acc[:0], found // add reads found
	return acc, accepted, refused, stop
}

// undoEntry is what checkOne changed, so a refused item can take back the
// tentative sums (and reserved keys) of its changes checked before the
// refused one.
type undoEntry struct {
	c      *cell // the counter's cell, or nil for one in fresh
	prev   int64 // its tentative sum before
	id     change.ID
	seen   bool // id was in fresh before
	newKey bool
}

// checkOne checks one change against its counter's tentative value and
// records the new one (for a counter new to s, in s.fresh when track is
// set), and what it did in u. On the fast path it returns errExclusive
// for a change that needs the exclusive path.
func (a *Accumulator) checkOne(s *shard, ch change.Change, excl, track bool, u *undoEntry) (*cell, error) {
	if !excl && exclusive(ch.Kind) {
		return nil, errExclusive
	}
	id := ch.Cell()
	c, cur, seen := a.tentativeOf(s, id, excl)
	*u = undoEntry{c: c, prev: cur, seen: seen}
	sum, ok := addChecked(cur, ch.Delta)
	if !ch.Kind.Additive() {
		var n change.Net
		n, ok = change.Net{N: cur}.Merge(ch)
		sum = n.N
	}
	if err := a.admit(c, sum, ok, excl); err != nil {
		return nil, err
	}
	if c == nil && !seen {
		if err := a.reserveNew(s, excl); err != nil {
			return nil, err
		}
		u.newKey = true
	}
	s.settle(c, id, sum, track)
	if c == nil && track {
		u.id = id
	}
	if c == nil && seen {
		return heldEarlier, nil
	}
	return c, nil
}

// tentativeOf returns id's cell in s (nil for a counter new to s; on the
// exclusive path, consolidated from every shard) and the counter's value
// as the group under check leaves it so far; for a counter new to s,
// seen says an earlier change of the group has it in s.fresh.
func (a *Accumulator) tentativeOf(s *shard, id change.ID, excl bool) (c *cell, cur int64, seen bool) {
	if excl {
		c = a.consolidate(id)
	} else {
		c = s.cells.get(id)
	}
	if c != nil {
		return c, s.tentative(c), false
	}
	cur, seen = s.fresh[id]
	return nil, cur, seen
}

// settle records sum as the value the group under check leaves the
// counter id at: in its cell c, or, for a counter new to s, in s.fresh
// when track is set (a later change of the group may meet it).
func (s *shard) settle(c *cell, id change.ID, sum int64, track bool) {
	switch {
	case c != nil:
		c.tent = sum
	case track:
		s.fresh[id] = sum
	}
}

// admit decides on a change that would leave its counter's value at sum
// (ok false: past int64): errExclusive on the fast path for one the
// shard's bound does not allow, ErrOverflow for one that does not fit.
func (a *Accumulator) admit(c *cell, sum int64, ok, excl bool) error {
	if !excl && (!ok || a.outside(sum) || (c != nil && c.big)) {
		return errExclusive
	}
	if !ok {
		a.m.rejected.Inc()
		return ErrOverflow
	}
	return nil
}

// reserveNew reserves a counter new to s (reserveKey): at the key limit
// the fast path gives way to the exclusive one, where the key may turn
// out to be pending in another shard, and the exclusive path refuses it.
func (a *Accumulator) reserveNew(s *shard, excl bool) error {
	if a.reserveKey(s) {
		return nil
	}
	if !excl {
		return errExclusive
	}
	a.m.rejected.Inc()
	return ErrBackoff
}

// tentative returns c's value as the group under check leaves it so far,
// stamping c for the group on first touch.
func (s *shard) tentative(c *cell) int64 {
	if c.stamp != s.group {
		c.stamp, c.tent = s.group, c.N
	}
	return c.tent
}

// rollback takes back what checkOne recorded for u in s.
func (a *Accumulator) rollback(s *shard, u undoEntry) {
	switch {
	case u.c != nil:
		u.c.tent = u.prev
	case u.seen:
		s.fresh[u.id] = u.prev
	default:
		delete(s.fresh, u.id)
	}
	if u.newKey {
		a.releaseKey(s)
	}
}
