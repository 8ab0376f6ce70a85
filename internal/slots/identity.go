package slots

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/counterd/counterd/internal/store"
)

// lane names lane l of id's identity in counterd_instances.
func laneName(id store.Identity, l int) string {
	if id.Generation == "" {
		return id.Instance + "/" + strconv.Itoa(l)
	}
	return id.Instance + "." + id.Generation + "/" + strconv.Itoa(l)
}

// legacy is the single row an instance had before lanes existed; only
// generation "" can have one.
func legacyName(id store.Identity) *string {
	if id.Generation != "" {
		return nil
	}
	return &id.Instance
}

// LastSeq returns the sequence number of the last batch of id committed
// in every lane, or 0. For generation "", a lane never written falls back
// to the instance's own row, which batches had before lanes existed.
func (s *Store) LastSeq(ctx context.Context, id store.Identity) (uint64, error) {
	marks, err := s.marks(ctx, []store.Identity{id})
	if err != nil {
		return 0, err
	}
	return marks[0].Min(), nil
}

// marks reads every lane's watermark of each identity.
func (s *Store) marks(ctx context.Context, ids []store.Identity) ([]store.Marks, error) {
	names, legacy := markNames(ids)
	var seqs []int64
	if err := s.pool.QueryRow(ctx, `SELECT `+readMarks(1), names, legacy).Scan(&seqs); err != nil {
		return nil, fmt.Errorf("read batch watermarks: %w", err)
	}
	return toMarks(seqs, len(ids))
}

func markNames(ids []store.Identity) (names []string, legacy []*string) {
	for _, id := range ids {
		for l := range store.Lanes {
			names = append(names, laneName(id, l))
			legacy = append(legacy, legacyName(id))
		}
	}
	return names, legacy
}

func toMarks(seqs []int64, n int) ([]store.Marks, error) {
	if len(seqs) != n*store.Lanes {
		return nil, fmt.Errorf("read batch watermarks: got %d, want %d", len(seqs), n*store.Lanes)
	}
	out := make([]store.Marks, n)
	for i, seq := range seqs {
		out[i/store.Lanes][i%store.Lanes] = uint64(seq)
	}
	return out, nil
}

// readMarks is the watermark of each lane named in parameter $p (falling
// back to the legacy row named in $p+1), in order; it is an expression, so
// a read can take it in the same statement, and snapshot, as the totals.
func readMarks(p int) string {
	return fmt.Sprintf(`(
    SELECT coalesce(array_agg(coalesce(ci.last_seq, legacy.last_seq, 0) ORDER BY l.ord), '{}')
    FROM unnest($%d::text[], $%d::text[]) WITH ORDINALITY AS l(name, legacy, ord)
    LEFT JOIN counterd_instances ci ON ci.instance = l.name
    LEFT JOIN counterd_instances legacy ON legacy.instance = l.legacy
)`, p, p+1)
}

// PruneInstances deletes the batch identity rows (one per lane) of
// generations that have not committed since before cutoff, and the claims
// (counterd_owners) of instances whose owner has not heartbeated since,
// and returns how many identity rows it deleted.
func (s *Store) PruneInstances(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM counterd_instances WHERE updated_at < $1`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("prune instances: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM counterd_owners WHERE heartbeat_at < $1`, cutoff); err != nil {
		return 0, fmt.Errorf("prune instance claims: %w", err)
	}
	return tag.RowsAffected(), nil
}
