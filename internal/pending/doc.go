// Package pending holds accepted changes in memory until they are
// committed, in two parts with one boundary between them.
//
// The Accumulator is the accept path. AddGroup checks a group of changes
// against what is pending (int64 overflow, the pending-key bound), appends
// the accepted ones to the journal as one record, and only then folds them
// into per-counter nets, each by its kind's rule (change.Fold, the same
// function the journal replays with; no code here names a kind). The
// order means nothing ever has to be
// undone: a failed journal append leaves memory as it was. The
// accumulating round is split into shards, one per event loop plus a
// shared one, each with its own lock, so loops accept at once; changes
// that do not add up (SET, EXPIRE), int64 edges and the pending-key limit
// take an exclusive path
// over every shard that gives the same answers as one map (shard.go).
// No lock is ever held across a database call. Cut takes every shard's
// lock, swaps their maps out as one round, rotating the journal so the
// round is exactly its segment.
//
// The Flusher is the write path. A single goroutine (Run) cuts a round when
// the interval elapses (Interval, growing towards IntervalMax while writes
// keep PostgreSQL busy: see pacer), when many keys are pending, or when
// someone calls Flush, and writes the queued rounds, oldest first, with their identity
// (instance, generation, sequence number), retrying with backoff while the
// store fails. A round the store already has (a retry whose reply was lost,
// or a journal replayed after a crash) is written once per lane.
//
// Reads never wait for a round to commit. A read takes the in-memory state
// (the accumulating maps and the queued rounds, each tagged with its round's identity)
// under every shard's lock, without touching the database, then reads
// the stored totals and the lanes' watermarks in one statement, and adds a
// round's delta to a key only if the round is above its lane's watermark:
// each round is counted exactly once, in memory or in the store, even when
// only some lanes of a round have committed. No increment ever waits on a
// database query: a shard's lock is held only for map work and the
// journal's write(2).
package pending
