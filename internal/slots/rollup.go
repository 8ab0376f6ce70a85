package slots

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The rollup's per-kind work. A kind family whose rows the rollup folds,
// expires or prunes says so on its Writer (rollupPart), and Fold,
// FoldBuckets, ExpireBuckets and Prune run the hooks of every writer in
// the order of the store's writers: the shared code names no kind.

// rollupPart is a kind family's part of a rollup pass.
type rollupPart struct {
	// fold folds the family's own slot rows at the end of each Fold,
	// after the totals (uniques' sketches).
	fold func(s *Store, ctx context.Context) error
	// foldBuckets folds the family's bucket slot rows in FoldBuckets,
	// adding to res; the next writer's runs only if it leaves res not
	// Limited.
	foldBuckets func(s *Store, ctx context.Context, opts FoldOptions, res *BucketFoldResult) error
	// expireBuckets deletes up to chunk of the family's buckets whose
	// keep_until is before at (now() when nil), one transaction, and
	// says how many; ExpireBuckets runs every writer's in turn, chunk
	// after chunk, until each deletes fewer than chunk.
	expireBuckets func(s *Store, ctx context.Context, at *time.Time, chunk int) (int64, error)
	// expireKeys deletes the family's own rows of keys (sorted) whose
	// expiry passed, in the rollup's transaction expiring them (Expire),
	// and returns those it deleted: a key it leaves out (one a round
	// holds) is not expired this time.
	expireKeys func(ctx context.Context, tx pgx.Tx, keys []string) ([]string, error)
	// prune deletes what the family keeps beside counts once it can no
	// longer matter (INCRONCE's seen entries), in chunks, and says how
	// many it deleted.
	prune func(s *Store, ctx context.Context, opts PruneOptions) (int64, error)
	// pruned names prune's count in the rollup's log ("pruned_seen").
	pruned string
}

// foldKinds runs every writer's fold.
func (s *Store) foldKinds(ctx context.Context) error {
	for _, w := range s.ws.list {
		if w.rollup.fold == nil {
			continue
		}
		if err := w.rollup.fold(s, ctx); err != nil {
			return err
		}
	}
	return nil
}

// PruneOptions tune Prune.
type PruneOptions struct {
	// Slack is how long an entry is kept past the end of what it
	// decides (ROLLUP_SEEN_SLACK for INCRONCE's seen entries).
	Slack time.Duration
	// SetTombstoneSlack is how long an exact set's tombstone (a
	// non-member's row) is kept after its last decision
	// (ROLLUP_SET_TOMBSTONE_SLACK): a reconcile as of that long ago
	// still sees it (kind_member.go).
	SetTombstoneSlack time.Duration
	// Chunk is how many rows one statement deletes (default
	// DefaultFoldChunk).
	Chunk int
}

// Pruned is what one kind's prune deleted.
type Pruned struct {
	// Name names the count in the rollup's log.
	Name string
	// Rows is how many rows it deleted.
	Rows int64
}

// Prune runs every kind's pruning (each deletes in chunks, skipping rows
// a round holds) and returns what each deleted, in the order of the store's writers. It
// stops at the first that fails.
func (s *Store) Prune(ctx context.Context, opts PruneOptions) ([]Pruned, error) {
	var out []Pruned
	for _, w := range s.ws.list {
		if w.rollup.prune == nil {
			continue
		}
		n, err := w.rollup.prune(s, ctx, opts)
		out = append(out, Pruned{Name: w.rollup.pruned, Rows: n})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
