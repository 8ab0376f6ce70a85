package hotness

import (
	"cmp"
	"slices"
	"strings"
	"sync/atomic"
)

// entry is one hot key. While a key is hot its increments are counted here,
// exactly, instead of in the sketch; the count decays with the sketch.
type entry struct {
	count atomic.Uint64
	hash  uint64
	key   string
	_     [32]byte // one cache line per entry: hot keys' counters don't share
}

// index is an immutable open-addressing view of the hot table, replaced
// whole on every change so that Observe reads it without a lock.
type index struct {
	slots []*entry
	mask  uint64
}

// indexSlots is the slot count of an index holding n entries: at most half
// full, so probes stay short.
func indexSlots(n int) int {
	s := 2
	for s < 2*n {
		s <<= 1
	}
	return s
}

func newIndex(entries []*entry) *index {
	x := &index{slots: make([]*entry, indexSlots(len(entries)))}
	x.mask = uint64(len(x.slots) - 1)
	for _, e := range entries {
		i := e.hash & x.mask
		for x.slots[i] != nil {
			i = (i + 1) & x.mask
		}
		x.slots[i] = e
	}
	return x
}

// find returns the entry for hash h, or nil.
func (x *index) find(h uint64) *entry {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		e := x.slots[i]
		if e == nil || e.hash == h {
			return e
		}
	}
}

// HotKey is one hot key as Hot reports it.
type HotKey struct {
	Key  string
	Rate float64 // estimated increments per second, now
	N    int     // sampling factor now
}

// Hot returns the currently hot keys, hottest first. Keys whose rate has
// fallen below CoolRate are dropped first, observed lately or not.
func (c *Classifier) Hot() []HotKey {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stepLocked(now) {
		c.pruneLocked(now)
	}
	d := c.denom(now, c.epochStart.Load())
	out := make([]HotKey, 0, len(c.entries))
	for _, e := range c.entries {
		v := float64(e.count.Load())
		out = append(out, HotKey{Key: e.key, Rate: v * c.perCount / d, N: c.factor(v, d)})
	}
	slices.SortFunc(out, func(a, b HotKey) int {
		if a.Rate != b.Rate {
			return cmp.Compare(b.Rate, a.Rate)
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// HotCount returns how many keys are hot now. It costs a lock and a pass
// over the hot table, not a sort or an allocation.
func (c *Classifier) HotCount() int {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stepLocked(now) {
		c.pruneLocked(now)
	}
	return len(c.entries)
}

// enter makes the key hot, unless it is already or the table is full of
// hotter keys, and returns its sampling factor. idx locates it in the sketch.
func (c *Classifier) enter(h uint64, key []byte, idx *cols, now int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.index.Load().find(h); e != nil {
		// Another goroutine let it in first; this increment stays in the sketch.
		return c.factor(float64(e.count.Load()), c.denom(now, c.epochStart.Load()))
	}
	// Re-read: a decay step may have run since the caller's estimate.
	v := c.sk.estimate(idx)
	if c.rate(v, now) < c.opts.HotRate {
		return 1
	}
	if len(c.entries) >= c.opts.MaxHot {
		i := c.coolestLocked()
		// Evict only for a hotter key: otherwise the coolest would come
		// straight back, and each would evict the other on every increment.
		if cv := c.entries[i].count.Load(); v <= cv {
			c.floor.Store(cv)
			return 1
		}
		c.removeLocked(i)
	}
	e := &entry{hash: h, key: string(key)}
	e.count.Store(v)
	c.entries = append(c.entries, e)
	c.publishLocked()
	return c.factor(float64(v), c.denom(now, c.epochStart.Load()))
}

// leave makes e cold again if its rate is still below CoolRate.
func (c *Classifier) leave(e *entry, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.entries, e)
	if i < 0 || c.rate(e.count.Load(), now) >= c.opts.CoolRate {
		return
	}
	c.removeLocked(i)
	c.publishLocked()
}

// pruneLocked drops every entry whose rate is below CoolRate at now.
func (c *Classifier) pruneLocked(now int64) {
	n := len(c.entries)
	for i := 0; i < len(c.entries); {
		if c.rate(c.entries[i].count.Load(), now) < c.opts.CoolRate {
			c.removeLocked(i)
		} else {
			i++
		}
	}
	if len(c.entries) != n {
		c.publishLocked()
	} else {
		c.setFloorLocked()
	}
}

// removeLocked deletes entry i, handing its count back to the sketch so the
// key's estimate carries on from where it was. The caller publishes.
func (c *Classifier) removeLocked(i int) {
	e := c.entries[i]
	var idx cols
	c.sk.locate(e.hash, &idx)
	c.sk.raise(&idx, e.count.Load())
	last := len(c.entries) - 1
	c.entries[i] = c.entries[last]
	c.entries[last] = nil
	c.entries = c.entries[:last]
}

// publishLocked makes the current entries visible to Observe.
func (c *Classifier) publishLocked() {
	c.index.Store(newIndex(c.entries))
	c.setFloorLocked()
}

// setFloorLocked records the coolest count when the table is full, so that
// Observe can turn away cooler candidates without taking the lock. Counts
// only grow between decay steps, so a stale floor never wrongly admits.
func (c *Classifier) setFloorLocked() {
	if len(c.entries) < c.opts.MaxHot {
		c.floor.Store(0)
		return
	}
	c.floor.Store(c.entries[c.coolestLocked()].count.Load())
}

// coolestLocked returns the index of the entry with the smallest count.
func (c *Classifier) coolestLocked() int {
	best := 0
	for i, e := range c.entries {
		if e.count.Load() < c.entries[best].count.Load() {
			best = i
		}
	}
	return best
}
