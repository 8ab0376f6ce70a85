// Package slots is counterd's PostgreSQL store: it writes increments as
// slotted upserts, folds slot rows into base totals, and reads totals.
//
// One counter is kept as a base row in counters plus up to Slots rows in
// counter_slots. A write adds to a slot row that no other transaction holds
// (SELECT ... FOR UPDATE SKIP LOCKED), so concurrent writers of one hot key
// spread over its slots instead of queueing on one row lock. Each Store
// has a home slot, picked at random when it opens, and looks for a free
// row from there up, then from 0: the daemons of a fleet start from
// different rows and seldom skip or wait for each other's. When every
// existing slot of a key is held it creates its home row, or, that row
// existing (and so held), upserts into a random other slot (INSERT ... ON
// CONFLICT DO UPDATE), which may wait. A whole batch is one
// INSERT over arrays (kind_total.go): a lateral SKIP LOCKED
// pick feeds the upsert key by key, in key order, so a writer only waits
// for a row while holding rows of smaller keys and writers cannot form a
// lock cycle. A deadlock or serialization failure is still retried, in
// case a database setting or another client breaks that order. Counts are
// numeric, so no sum can overflow and no key can make a batch fail.
//
// Each batch carries an identity (instance, generation, sequence number),
// recorded per lane in counterd_instances in the same statement as the
// lane's writes; Read returns totals and those watermarks from one
// snapshot, so a caller holding batches in memory can tell exactly which
// of them the totals already include.
//
// Time-window buckets (change kinds Minute, Hour, Day) are kept the same
// way in counter_bucket_slots and counter_bucket_rows: a round writes them
// in the same statement as its totals (kind_window.go), FoldBuckets
// folds them and ExpireBuckets deletes those past their keep_until.
//
// Unique members (change.Unique, PFADD) are postgresql-hll sketches in
// counter_unique_slots, one per key and slot, unioned with hll_union;
// Fold unions them into counter_unique_sketches (kind_unique.go). Those
// of a windowed key are also sketches per bucket (change.UniqueMinute,
// Hour, Day) in counter_unique_bucket_slots, which FoldBuckets unions into
// counter_unique_bucket_sketches and ExpireBuckets deletes past their
// keep_until (kind_unique_window.go).
//
// Each kind of change is written by the Writer its family declares
// (writer.go, kind_*.go), which a store takes from its Options.Kinds (the
// daemon's and the rollup's list, internal/catalog): totals and windows
// as parts of one statement,
// SET, EXPIRE, budget grants and any other kind by statements of their
// own in the round's transaction, which also records its lanes. The
// rollup's work for a kind (folding its own slot rows, deleting its
// buckets past keep_until, pruning INCRONCE's seen entries) hangs on the
// same Writer (rollup.go): Fold, FoldBuckets, ExpireBuckets and Prune run
// every writer's hooks, naming no kind.
//
// Fold moves slot counts into the base rows in the same transaction that
// deletes them, so an increment is never lost or counted twice while writers
// keep writing. Readers see base plus slots in one statement (the
// counter_totals view), so they never see a fold half done.
package slots
