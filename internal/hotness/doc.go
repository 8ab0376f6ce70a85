// Package hotness tells hot counter keys from cold ones by their recent rate,
// so that counterd can sample the increments of a viral key (+N with
// probability 1/N) instead of writing every one.
//
// The idea to hold first: every increment is counted once, in one of two
// places — a cold key in a count-min sketch shared by all keys, a hot key in
// its own exact counter in a small hot table — and both decay exponentially
// in lockstep, so a key's rate is its decayed count divided by a known
// number. Memory is fixed by the sketch's size and MaxHot, whatever the
// number of distinct keys.
//
// # Rates
//
// Counts are fixed-point (16 fractional bits). They decay in steps of
// s = HalfLife/16: at each step every count is multiplied by f = 2^(-1/16).
// Between steps counts only grow. A steady rate r leaves, u into a step,
//
//	count = r * (s*f/(1-f) + u)
//
// so a rate is reported as count/(s*f/(1-f) + u). That is exact for a
// steady rate at any point of a step, with no saw-tooth from the steps, and
// s*f/(1-f) + u tends to HalfLife/ln 2 as s shrinks. A key that starts at
// rate r shows r*(1 - 2^(-t/HalfLife)) after t: at 10x HotRate it is hot
// after 0.15 half-lives. Once it stops its rate halves every half-life: from
// 10x HotRate it falls below CoolRate (HotRate/2) in about 4.3 half-lives.
//
// Decay is amortised. The first Observe to see that a step is due takes
// the mutex with TryLock (the others carry on, never waiting) and passes
// over the sketch, subtracting from each counter with an atomic add, so
// that increments racing with the pass are kept. A pass over the default
// sketch (BenchmarkDecayStep) runs once per 62.5 ms; that Observe pays for
// it. If
// the goroutine doing a pass is descheduled, increments arriving meanwhile
// are decayed as if they had arrived before it, undercounting them by about
// 2^(-delay/HalfLife): nothing for a delay of milliseconds.
//
// # Sampled observation
//
// Only one call in Options.Every (4 by default), picked with a cheap
// runtime random number, is counted, with weight Every: the sketch and the
// hot table see a quarter of the calls, so a quarter of the cache misses
// and locked adds. Counts stay unbiased, so rates and the moment a key
// turns hot are the same on average; what changes is the noise. A decayed
// count at rate r holds about r*HalfLife/ln 2 events, 1443 at the default
// HotRate, and counting one in Every leaves 1/Every of them, so its
// relative standard deviation is sqrt(Every*ln 2/(r*HalfLife)). The
// automatic Every is the largest power of two (at most MaxEvery) leaving
// 256 counted events at HotRate: 6.25% noise at the threshold, less above
// it. Observe still hashes every call and looks the key up in the hot
// table, because it returns N; Tally, for keys that are never sampled,
// returns before hashing on the calls it does not count.
//
// # Sketch
//
// Depth rows of Width counters (default 4 x 16384, 512 KiB), one maphash
// per key, rows by double hashing. Increments use conservative update: only
// the key's counters below its estimate+1 are raised, so colliding keys
// inflate each other less. Count-min never underestimates; it overestimates
// a key's rate by at most e/Width times the total rate of cold keys, with
// probability 1-e^-Depth: at defaults 1.7e-4 x total, 166/s at a million
// increments/s against a HotRate of 1000/s. Conservative update does better
// than the bound: with a million distinct keys the overestimate measures
// about total/(2.5*Width), 24/s at 1M/s and 242/s at 10M/s, where plain
// count-min would average total/Width, 61/s and 610/s. A hot key is counted
// in its entry, not the sketch, so a few viral keys do not raise the floor
// for all others.
//
// # Hot table
//
// At most MaxHot entries, each holding a key's exact decayed count and its
// name (allocated once, on entering), found by the 64-bit hash: two keys
// with equal hashes would share an entry (odds about n²/2^65 among n hot
// keys). Observe finds entries in an immutable open-addressing index loaded
// from an atomic pointer, so the hot path takes no lock. Entering and
// leaving take the mutex and publish a new index; both are rare, since
// entering takes a rate above HotRate and leaving a fall below CoolRate.
//
// A key enters when its estimate reaches HotRate and leaves when it falls
// below CoolRate: checked when it is observed, and for a key no longer
// observed at every decay step and in Hot and HotCount. A leaving key's
// count goes back into the sketch, so its estimate carries on. When the
// table is full a newcomer evicts the coolest entry only if it is hotter;
// otherwise the two would evict each other on every increment. The coolest
// count is kept in an atomic, so cooler newcomers are turned away without
// the lock. A key turned away is reported cold (N = 1): its increments are
// written exactly, which costs writes but nothing in correctness.
//
// # Clock
//
// Reading the system clock costs as much as the rest of Observe, so New
// starts a goroutine that stores the time in an atomic every
// HalfLife/256 (3.9 ms by default, at least 1 ms); Close stops it. With
// Options.Now set no goroutine is started and Now is called on every
// Observe.
//
// # Performance
//
// The benchmarks (go test -run '^$' -bench . -benchmem ./internal/hotness)
// and the figures measured with them are in docs/performance.md, under
// "Hot-key classifier".
//
// Bytes reports 614,872 with defaults: the 512 KiB sketch, MaxHot entries
// of 64 bytes plus a pointer, and the largest index (16 KiB); the names of
// hot keys come on top.
package hotness
