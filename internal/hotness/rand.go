package hotness

import _ "unsafe" // for go:linkname

// cheaprand is the runtime's per-thread wyrand: about 2 ns, where
// math/rand/v2's top-level Uint32 (ChaCha8) measured about 6 ns on the
// development VM, three times the whole of a skipped Tally. Observation
// sampling needs no cryptographic quality, only independence from the key.
// The runtime keeps this symbol linkable on purpose (it is on its list of
// names that widely used packages reach with linkname).
//
//go:linkname cheaprand runtime.cheaprand
func cheaprand() uint32
