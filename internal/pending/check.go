package pending

import (
	"errors"

	"github.com/counterd/counterd/internal/change"
)

// errExclusive stops a fast-path check at a change that needs every
// shard's lock (see shard.go); it never reaches a caller.
var errExclusive = errors.New("change needs the exclusive path")

// check returns the changes of items that may be accepted, how many items
// that is and how many were refused, and leaves each accepted change's
// cell (nil for a counter new to s) in s.found. On the fast path (excl
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
	for i, ch := range items {
		errs[i] = nil
		if idle(ch) {
			continue // nothing to record
		}
		c, _, err := a.checkOne(s, ch, excl, track)
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
	n := a.keys.Add(1)
	if n > a.maxPending {
		a.keys.Add(-1)
		return false
	}
	if n == a.maxKeys {
		a.kick()
	}
	s.reserved++
	return true
}

// releaseKey gives back a key reserveKey counted for s.
func (a *Accumulator) releaseKey(s *shard) {
	a.keys.Add(-1)
	s.reserved--
}

// lookup returns id's cell in s, consolidated from every shard on the
// exclusive path.
func (a *Accumulator) lookup(s *shard, id change.ID, excl bool) *cell {
	if excl {
		return a.consolidate(id)
	}
	return s.cells.get(id)
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
			if c, u, err = a.checkOne(s, sub, excl, true); err != nil {
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
// set). On the fast path it returns errExclusive for a change that needs
// the exclusive path.
func (a *Accumulator) checkOne(s *shard, ch change.Change, excl, track bool) (*cell, undoEntry, error) {
	if !excl && exclusive(ch.Kind) {
		return nil, undoEntry{}, errExclusive
	}
	id := ch.Cell()
	c := a.lookup(s, id, excl)
	u := undoEntry{c: c}
	if c != nil {
		u.prev = s.tentative(c)
	} else {
		u.prev, u.seen = s.fresh[id]
	}
	n, ok := change.Net{N: u.prev}.Merge(ch)
	if err := a.admit(c, n.N, ok, excl); err != nil {
		return nil, u, err
	}
	if c == nil && !u.seen {
		if err := a.reserveNew(s, excl); err != nil {
			return nil, u, err
		}
		u.newKey = true
	}
	switch {
	case c != nil:
		c.tent = n.N
	case track:
		s.fresh[id] = n.N
		u.id = id
	}
	return c, u, nil
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
