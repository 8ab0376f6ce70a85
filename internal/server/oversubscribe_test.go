package server

import (
	"runtime"
	"testing"
)

// The daemon runs with two Ps a core unless GOMAXPROCS is set, and the
// default number of event loops still follows the cores, not the Ps.
func TestOversubscribe(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })

	if got := Oversubscribe("3"); got != before || runtime.GOMAXPROCS(0) != before {
		t.Fatalf("with GOMAXPROCS set: Oversubscribe = %d, GOMAXPROCS %d; want both %d (the setting wins)", got, runtime.GOMAXPROCS(0), before)
	}
	if got := Oversubscribe(""); got != 2*cores || runtime.GOMAXPROCS(0) != 2*cores {
		t.Fatalf("unset: Oversubscribe = %d, GOMAXPROCS %d; want both %d (two per core)", got, runtime.GOMAXPROCS(0), 2*cores)
	}
	if got, want := DefaultLoops(), max(1, cores/2); got != want {
		t.Fatalf("DefaultLoops = %d after Oversubscribe; want %d (half the cores)", got, want)
	}
}
