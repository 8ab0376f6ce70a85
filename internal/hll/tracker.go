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

	// A second set, inside the first: the hashes Confirm marked. While
	// the first is exact, a bit per slot of table (conf) and zeroConf for
	// hash 0, so a lookup of both is one probe; once it has registers, a
	// Tracker of their own (confirmed), exact until they themselves pass
	// the limit, as a sketch of them alone would be.
	conf      []uint64
	zeroConf  bool
	confirmed *Tracker
}

// NewTracker returns an empty tracker with DefaultSettings.
func NewTracker() *Tracker { return newTracker(DefaultSettings()) }

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
	_, ok := t.slot(h)
	return ok
}

// slot returns the table slot holding h (not 0), and false when no slot
// does.
func (t *Tracker) slot(h uint64) (uint64, bool) {
	if len(t.table) == 0 {
		return 0, false
	}
	mask := uint64(len(t.table) - 1)
	// The hashes are MurmurHash3 output: their low bits spread evenly,
	// and Sketch uses them as the register index, so probe from the high
	// bits instead.
	for i := (h >> 32) & mask; ; i = (i + 1) & mask {
		switch t.table[i] {
		case h:
			return i, true
		case 0:
			return 0, false
		}
	}
}

// insert puts h (not 0, not held) into the table, which has room, and
// returns its slot.
func (t *Tracker) insert(h uint64) uint64 {
	mask := uint64(len(t.table) - 1)
	i := (h >> 32) & mask
	for t.table[i] != 0 {
		i = (i + 1) & mask
	}
	t.table[i] = h
	return i
}

// grow doubles the table (or makes the first) and moves the hashes over,
// with their confirmed marks.
func (t *Tracker) grow() {
	old, oldConf := t.table, t.conf
	t.table = make([]uint64, max(minTable, 2*len(old)))
	t.conf = nil
	if oldConf != nil {
		t.conf = make([]uint64, (len(t.table)+63)/64)
	}
	for j, h := range old {
		if h == 0 {
			continue
		}
		i := t.insert(h)
		if oldConf != nil && oldConf[j/64]&(1<<(j%64)) != 0 {
			t.conf[i/64] |= 1 << (i % 64)
		}
	}
}

// Confirm marks h, which Add has been given, as confirmed; Confirmed
// answers for the confirmed hashes alone what Holds answers for all.
// A hash Add has not been given (or one given before Reset) is added.
func (t *Tracker) Confirm(h uint64) {
	if t.regs == nil && h != 0 {
		if i, ok := t.slot(h); ok { // the common case: one probe
			t.mark(i)
			return
		}
	}
	t.Add(h)
	if t.regs != nil {
		if t.confirmed == nil {
			t.confirmed = newTracker(t.set)
		}
		t.confirmed.Add(h)
		return
	}
	if h == 0 {
		t.zeroConf = true
		return
	}
	i, _ := t.slot(h) // Add put it there
	t.mark(i)
}

// mark sets the confirmed bit of table slot i.
func (t *Tracker) mark(i uint64) {
	if t.conf == nil {
		t.conf = make([]uint64, (len(t.table)+63)/64)
	}
	t.conf[i/64] |= 1 << (i % 64)
}

// Confirmed reports whether adding h to the confirmed hashes would
// change nothing: h is confirmed while exact, or with registers the
// confirmed hashes' register for h is already at least what h sets.
func (t *Tracker) Confirmed(h uint64) bool {
	switch {
	case t.regs != nil:
		return t.confirmed != nil && t.confirmed.Holds(h)
	case h == 0:
		return t.zeroConf
	case t.conf == nil:
		return false
	}
	i, ok := t.slot(h)
	return ok && t.conf[i/64]&(1<<(i%64)) != 0
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
	if t.conf != nil || t.zeroConf {
		// The confirmed hashes move to a tracker of their own, exact
		// until they pass the limit themselves: registers answer for a
		// set only once a sketch of it would hold registers.
		c := newTracker(t.set)
		if t.zeroConf {
			c.Add(0)
		}
		for i, e := range t.table {
			if e != 0 && t.conf != nil && t.conf[i/64]&(1<<(i%64)) != 0 {
				c.Add(e)
			}
		}
		t.confirmed = c
	}
	t.regs, t.table, t.n, t.zero = s, nil, 0, false
	t.conf, t.zeroConf = nil, false
}
