// Package pending coalesces accepted increments in memory and writes them
// to the store by group commit.
//
// Add folds each increment into a per-key net delta in one of many shards,
// so connections rarely contend on a lock and a key never contends with
// itself across shards. A single flusher goroutine (Run) swaps the shards
// out as one round when the interval elapses, when many keys are pending,
// or when someone calls Flush, and writes the round as one batch; while a
// round is in flight the next one accumulates.
//
// Reads combine three parts that must not overlap: the current shards, the
// round in flight, and the store. A gate (a context-aware read/write lock)
// makes the moment a round commits exclusive, so a reader either sees the
// round in memory and not yet in the store, or in the store and no longer
// in memory, never both or neither.
package pending
