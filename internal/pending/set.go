package pending

import "github.com/counterd/counterd/internal/change"

// Netting in the accumulator. Each change lands on its cell
// (change.Change.Cell) and nets into it by its kind's rule, with
// change.Fold: the function the journal nets a segment with on replay,
// so a replayed round coalesces exactly as the live one did. A change
// whose kind does not add up (a SET replacing a key's total, an EXPIRE)
// or that cancels other cells takes the exclusive path, where one cell
// holds the counter's whole value (see shard.go).

// exclusive reports whether a change of kind k needs the exclusive path.
func exclusive(k change.Kind) bool {
	if k == change.Plain() {
		return false // it adds up and cancels nothing
	}
	s := k.Spec()
	return s != nil && (s.Merge != nil || len(s.Cancels) > 0)
}

// idle reports whether ch changes nothing: an additive change of 0
// (sampled out, or INCRBY 0).
func idle(ch change.Change) bool {
	return ch.Delta == 0 && ch.Var == 0 && ch.Kind.Additive()
}

// fold nets ch, checked by check, into its cell c of cs. (The accept path
// nets a change that needs no exclusive path, one that adds up and
// cancels nothing, with change.AddNet directly: Fold's merge for it.)
func (cs *cells) fold(c *cell, ch change.Change) {
	if !change.Fold(&c.Net, ch, cs) {
		panic("BUG: a checked change overflows its cell")
	}
}

// restore puts a change replayed from the journal into cs. The journal
// nets a segment's records with change.Fold, so each change is already
// the net of its cell, and their order, first appearance, no longer
// matters.
func (cs cells) restore(ch change.Change) {
	id := ch.Cell()
	c := cs.get(id)
	if c == nil {
		c = cs.add(id)
	}
	c.Net, _ = c.Net.Merge(ch)
}
