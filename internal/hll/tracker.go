package hll

// Tracker answers, hash by hash, what Sketch.Add would answer on a sketch
// with the same settings fed the same hashes, without keeping the exact
// form sorted: while exact it holds the hashes in an open-addressing set,
// so a lookup is one probe into memory instead of a binary search whose
// every step misses the cache once many keys are tracked (PFADD's reply
// is decided this way for every member). Past the exact limit it holds a
// Sketch of registers. It cannot be marshalled; use a Sketch for that.
// It is not safe for concurrent use.
type Tracker struct {
	set   Settings
	limit int
	// n counts the distinct hashes held while exact: those in table,
	// plus hash 0 when zero is set (0 marks a free slot in table).
	n     int
	table []uint64
	zero  bool
	// regs is the register sketch once more than limit hashes came.
	regs *Sketch
}

// NewTracker returns an empty tracker with DefaultSettings.
func NewTracker() *Tracker { return newTracker(DefaultSettings) }

// newTracker returns an empty tracker with settings s, which are valid.
func newTracker(s Settings) *Tracker {
	return &Tracker{set: s, limit: s.explicitLimit()}
}

// minTable is the first table's size: most keys see few members.
const minTable = 8

// Add records h and reports whether a Sketch would have changed (see
// Sketch.Add): a hash new while exact, the switch to registers, or a
// register raised.
func (t *Tracker) Add(h uint64) bool {
	if t.regs != nil {
		return t.regs.addRegister(h)
	}
	if h == 0 {
		if t.zero {
			return false
		}
	} else if t.holds(h) {
		return false
	}
	if t.n >= t.limit {
		t.toRegisters(h)
		return true
	}
	t.n++
	if h == 0 {
		t.zero = true
		return true
	}
	if 4*t.n > 3*len(t.table) {
		t.grow()
	}
	t.insert(h)
	return true
}

// Holds reports whether Add(h) would change nothing: h is held while
// exact, or its register is already at least what h would set.
func (t *Tracker) Holds(h uint64) bool {
	switch {
	case t.regs != nil:
		return !t.regs.raises(h)
	case h == 0:
		return t.zero
	}
	return t.holds(h)
}

// holds reports whether the table has h (not 0).
func (t *Tracker) holds(h uint64) bool {
	if len(t.table) == 0 {
		return false
	}
	mask := uint64(len(t.table) - 1)
	// The hashes are MurmurHash3 output: their low bits spread evenly,
	// and Sketch uses them as the register index, so probe from the high
	// bits instead.
	for i := (h >> 32) & mask; ; i = (i + 1) & mask {
		switch t.table[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

// insert puts h (not 0, not held) into the table, which has room.
func (t *Tracker) insert(h uint64) {
	mask := uint64(len(t.table) - 1)
	i := (h >> 32) & mask
	for t.table[i] != 0 {
		i = (i + 1) & mask
	}
	t.table[i] = h
}

// grow doubles the table (or makes the first) and moves the hashes over.
func (t *Tracker) grow() {
	old := t.table
	t.table = make([]uint64, max(minTable, 2*len(old)))
	for _, h := range old {
		if h != 0 {
			t.insert(h)
		}
	}
}

// toRegisters switches to registers holding every hash so far and h, as
// Sketch.Add does when an exact sketch is full.
func (t *Tracker) toRegisters(h uint64) {
	s := &Sketch{set: t.set, state: KindEmpty}
	s.toRegisters()
	if t.zero {
		s.addRegister(0)
	}
	for _, e := range t.table {
		if e != 0 {
			s.addRegister(e)
		}
	}
	s.addRegister(h)
	t.regs, t.table, t.n, t.zero = s, nil, 0, false
}
