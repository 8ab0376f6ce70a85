package hotness

import (
	"testing"
	"time"
)

// TestClockSleepsWhenUnread: the coarse clock stops ticking once nobody
// reads it (an idle daemon spent 2-3% of a core on its ticks), a read
// of the sleeping clock is the real time and wakes it, and it ticks
// again.
func TestClockSleepsWhenUnread(t *testing.T) {
	t.Parallel()
	var k clock
	k.start(nil, time.Millisecond)
	defer k.close()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("clock did not %s within 30s (coarse %d)", what, k.coarse.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("fall asleep unread", func() bool { return k.coarse.Load() == asleep })
	before := time.Since(k.origin)
	if got := time.Duration(k.now()); got < before {
		t.Errorf("read while asleep: %v; want at least %v (the real clock)", got, before)
	}
	waitFor("wake on a read", func() bool { return k.coarse.Load() >= 0 })
	// Read on every tick for a while: it must not fall asleep meanwhile.
	for range 3 * idleTicks {
		if k.now(); k.coarse.Load() == asleep {
			// A read may race the tick that saw none since the last;
			// it wakes the clock again, so only a clock that stays
			// asleep while read is wrong.
			waitFor("wake on a read", func() bool { return k.now() >= 0 && k.coarse.Load() >= 0 })
		}
		time.Sleep(time.Millisecond) // one read a tick is the point: not a wait for an event
	}
	k.close()
	if got := k.coarse.Load(); got != stopped {
		t.Errorf("coarse after close: %d; want %d", got, stopped)
	}
}
