package store

import (
	"context"
	"errors"

	"github.com/counterd/counterd/internal/change"
)

// Store is where rounds are written and totals read.
//
// Every read returns, from one snapshot, what is stored and the lanes'
// watermarks of the identities asked about: a caller holding rounds in
// memory adds a round to a key only if its sequence number is above the
// watermark of the key's lane.
type Store interface {
	// ApplyOnce writes a round exactly once per lane: a round whose
	// identity a lane has already recorded is skipped in that lane.
	ApplyOnce(ctx context.Context, id BatchID, batch []change.Change) (ApplyResult, error)
	// Read returns each key's stored total (a key never counted is 0).
	Read(ctx context.Context, keys []string, ids []Identity) (Snapshot, error)
	// ReadBuckets returns key's stored buckets of windowed kind k that
	// start from from through to (unix seconds); for a kind without
	// buckets (from and to 0), its one stored cell, if it has one.
	ReadBuckets(ctx context.Context, key string, k change.Kind, from, to int64, ids []Identity) (BucketSnapshot, error)
	// ReadTop returns the n keys starting with prefix with the largest
	// stored count over the buckets of kind k starting at or after since,
	// and the stored count of each of keys.
	ReadTop(ctx context.Context, prefix string, k change.Kind, since int64, n int, keys []string, ids []Identity) (TopSnapshot, error)
	// Overflows counts stored totals beyond int64 (a store may count a
	// total only once its background work has folded it).
	Overflows(ctx context.Context) (int64, error)
}

// ErrOverflow reports that a total does not fit in int64. Stored counts
// never overflow; only a reader asking for an int64 sees this, for the one
// key concerned.
var ErrOverflow = errors.New("total is beyond int64")

// ErrPartial is wrapped by ApplyOnce when a store of partitions wrote the
// round on some partitions and not on others (a partition down, or behind
// on an earlier round). Applying the round again writes what is missing;
// meanwhile later rounds may be applied too, and are written on the
// partitions that are not behind: a store that returns it keeps each
// partition's rounds in order itself.
var ErrPartial = errors.New("round written on some partitions only")

// ErrFenced is wrapped by ApplyOnce when the round's instance belongs to
// another daemon now: this one must stop writing it.
var ErrFenced = errors.New("instance taken over by another daemon")

// ApplyResult says how a batch was written.
type ApplyResult struct {
	// Updated counts keys added to an existing slot row: a free one, or,
	// when none was free, the random slot's.
	Updated int
	// Inserted counts keys that created a slot row.
	Inserted int
	// Duplicate says the batch's identity was already recorded for every
	// lane, so nothing was written.
	Duplicate bool
	// Attempts is how many transactions it took (the number of writers
	// unless some were retried).
	Attempts int
	// Outcomes holds, for changes whose effect was decided in the
	// round's transaction and is their reply (an SADD's "was it new"),
	// that effect, by change.OpID; nil when the round has none. When
	// ApplyOnce fails it holds those of the transactions that committed
	// (a round committed in part): applying the round again decides only
	// the rest, so the caller keeps these.
	Outcomes map[string]int64
}
