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
	for i, ch := range items {
		errs[i] = nil
		if ch.Delta == 0 && ch.Var == 0 && !replaces(ch.Kind) {
			continue // sampled out, or INCRBY 0: nothing to record
		}
		if !excl && replaces(ch.Kind) {
			stop = i
			break
		}
		id := cellID(ch)
		c := a.lookup(s, id, excl)
		var cur int64
		newKey := false
		if c != nil {
			cur = s.tentative(c)
		} else {
			var seen bool
			cur, seen = s.fresh[id]
			newKey = !seen
		}
		sum, ok := addChecked(cur, ch.Delta)
		if replaces(ch.Kind) {
			sum, ok = ch.Delta, true // SET n, or an expiry time: nothing to add up
		}
		if !excl && (!ok || a.outside(sum) || (c != nil && c.big)) {
			stop = i
			break
		}
		if !ok {
			a.m.rejected.Inc()
			errs[i] = ErrOverflow
			refused++
			continue
		}
		if newKey && !a.reserveKey(s) {
			if !excl {
				stop = i // the key may be pending in another shard
				break
			}
			a.m.rejected.Inc()
			errs[i] = ErrBackoff
			refused++
			continue
		}
		switch {
		case c != nil:
			c.tent = sum
		case len(items) > 1:
			s.fresh[id] = sum
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
		if ch.Delta == 0 && ch.Var == 0 && !replaces(ch.Kind) {
			continue // sampled out, or INCRBY 0: nothing to record
		}
		s.expanded = a.win.Expand(append(s.expanded[:0], ch), ch, at)
		mark, undo := len(acc), s.undo[:0]
		var err error
		for _, sub := range s.expanded {
			var c *cell
			var u undoEntry
			if c, u, err = a.checkOne(s, sub, excl); err != nil {
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

// checkOne checks one change against its counter's tentative sum and
// records the new sum, for checkWindowed. On the fast path it returns
// errExclusive for a change that needs the exclusive path.
func (a *Accumulator) checkOne(s *shard, ch change.Change, excl bool) (*cell, undoEntry, error) {
	if !excl && replaces(ch.Kind) {
		return nil, undoEntry{}, errExclusive
	}
	id := cellID(ch)
	c := a.lookup(s, id, excl)
	u := undoEntry{c: c}
	var cur int64
	if c != nil {
		cur = s.tentative(c)
	} else {
		cur, u.seen = s.fresh[id]
	}
	u.prev = cur
	sum, ok := addChecked(cur, ch.Delta)
	if replaces(ch.Kind) {
		sum, ok = ch.Delta, true // SET n, or an expiry time: nothing to add up
	}
	if !excl && (!ok || a.outside(sum) || (c != nil && c.big)) {
		return nil, u, errExclusive
	}
	if !ok {
		a.m.rejected.Inc()
		return nil, u, ErrOverflow
	}
	if c == nil && !u.seen {
		if !a.reserveKey(s) {
			if !excl {
				return nil, u, errExclusive // the key may be pending in another shard
			}
			a.m.rejected.Inc()
			return nil, u, ErrBackoff
		}
		u.newKey = true
	}
	switch {
	case c != nil:
		c.tent = sum
	default:
		s.fresh[id] = sum
		u.id = id
	}
	return c, u, nil
}

// tentative returns c's value as the group under check leaves it so far,
// stamping c for the group on first touch.
func (s *shard) tentative(c *cell) int64 {
	if c.stamp != s.group {
		c.stamp, c.tent = s.group, c.n
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
