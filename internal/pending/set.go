package pending

import "github.com/counterd/counterd/internal/change"

// SET, DEL and EXPIRE in the accumulator. A Set change lands on its key's
// Total cell, which then replaces the stored total instead of adding to it
// (cell.set); increments after it add to the new value, and a Set after
// increments drops them. An Expire change has a cell of its own whose
// value is the last expiry accepted. The journal records every change in
// order and replay folds them with the same code, so a replayed round
// coalesces exactly as the live one did.

// replaces reports whether changes of kind k replace their cell's value
// rather than add to it, so even a zero one is recorded.
func replaces(k change.Kind) bool { return k == change.Set || k == change.Expire }

// cellID is the counter a change is coalesced into: a Set lands on its
// key's total.
func cellID(ch change.Change) change.ID {
	if ch.Kind == change.Set {
		return change.ID{Key: ch.Key, Kind: change.Total}
	}
	return ch.ID()
}

// fold applies ch to its cell c (cs.get(cellID(ch))). A Set also cancels
// an expiry accepted before it in the same round: SET and DEL remove a
// key's expiry, as in Redis; an EXPIRE after them sets it again.
func (cs cells) fold(c *cell, ch change.Change) {
	if ch.Kind == change.Set {
		if e := cs.other[change.ID{Key: ch.Key, Kind: change.Expire}]; e != nil {
			e.n = 0
		}
	}
	setCell(c, ch)
}

// setCell applies ch to c alone.
func setCell(c *cell, ch change.Change) {
	switch ch.Kind {
	case change.Set:
		c.n, c.v, c.set = ch.Delta, ch.Var, true
	case change.Expire:
		c.n, c.set = ch.Delta, true
	default:
		c.n += ch.Delta
		c.v += ch.Var
	}
}

// restore folds a change replayed from the journal into cs. The journal
// nets a segment's records the way fold does (a Set replaces its key's
// total and cancels an earlier expiry; see journal's scan.go), so each
// change is already the net of its cell, and their order, first
// appearance, no longer matters.
func (cs cells) restore(ch change.Change) {
	id := cellID(ch)
	c := cs.get(id)
	if c == nil {
		c = cs.add(id)
	}
	setCell(c, ch)
}

// change returns the change a round writes for the cell of id, and
// whether there is one.
func (c *cell) change(id change.ID) (change.Change, bool) {
	ch := change.Change{Key: id.Key, Kind: id.Kind, Bucket: id.Bucket, Delta: c.n, Var: c.v}
	if c.set && id.Kind == change.Total {
		ch.Kind = change.Set
	}
	return ch, c.n != 0 || c.v != 0 || c.set
}
