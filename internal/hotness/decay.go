package hotness

import "math"

// stepsPerHalfLife is how many decay steps make a half-life. Between steps
// counts only grow and the rate conversion accounts for the time since the
// last step, so more steps buy smoothness on changing rates, not accuracy on
// steady ones; each step costs one pass over the sketch.
const stepsPerHalfLife = 16

// tick applies the decay steps due by now, given start, the epochStart the
// caller loaded, and returns the epochStart to compute rates with. Observe
// passes wait=false: if another goroutine holds the lock (most likely
// decaying already), it goes on without waiting and the steps are left to it
// or to a later call.
func (c *Classifier) tick(now, start int64, wait bool) int64 {
	if now < start+c.step {
		return start
	}
	if wait {
		c.mu.Lock()
	} else if !c.mu.TryLock() {
		return start
	}
	c.stepLocked(now)
	start = c.epochStart.Load()
	c.mu.Unlock()
	return start
}

// stepLocked decays the sketch and the hot table by every step that has
// begun by now and drops keys that have cooled. It reports whether it
// stepped, and so pruned.
func (c *Classifier) stepLocked(now int64) bool {
	ep, epoch := now/c.step, c.epochStart.Load()/c.step
	if ep <= epoch {
		return false
	}
	mul := decayMul(float64(ep-epoch) * float64(c.step) / float64(c.opts.HalfLife))
	c.sk.decay(mul)
	for _, e := range c.entries {
		decayCell(&e.count, mul)
	}
	c.epochStart.Store(ep * c.step)
	c.pruneLocked(now)
	return true
}

// decayMul is the multiplier, as a fraction of 2^64, that decays a count by
// the given number of half-lives.
func decayMul(halfLives float64) uint64 {
	f := math.Exp2(-halfLives)
	if f < 0x1p-64 {
		return 0
	}
	return uint64(math.Ldexp(f, 64))
}
