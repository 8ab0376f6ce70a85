package slots

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Identity names one run of a daemon: its instance (stable across
// restarts, from the journal directory) and the generation of the run
// that created a round. Sequence numbers increase within a generation. A
// journal directory restored from an old snapshot starts a new generation,
// so its new rounds never collide with the high-water mark of rounds the
// database already has. Generation "" is the identity rounds had before
// generations existed.
type Identity struct {
	Instance   string
	Generation string
}

// BatchID identifies one flush round.
type BatchID struct {
	Identity
	Seq uint64
}

// lane names lane l of id's identity in counterd_instances.
func (id Identity) lane(l int) string {
	if id.Generation == "" {
		return id.Instance + "/" + strconv.Itoa(l)
	}
	return id.Instance + "." + id.Generation + "/" + strconv.Itoa(l)
}

// legacy is the single row an instance had before lanes existed; only
// generation "" can have one.
func (id Identity) legacy() *string {
	if id.Generation != "" {
		return nil
	}
	return &id.Instance
}

// LastSeq returns the sequence number of the last batch of id committed
// in every lane, or 0. For generation "", a lane never written falls back
// to the instance's own row, which batches had before lanes existed.
func (s *Store) LastSeq(ctx context.Context, id Identity) (uint64, error) {
	marks, err := s.marks(ctx, []Identity{id})
	if err != nil {
		return 0, err
	}
	return marks[0].Min(), nil
}

// Marks holds, per lane, the sequence number of the last batch committed.
type Marks [Lanes]uint64

// Min is the lowest watermark: every batch up to it is committed in
// every lane.
func (m Marks) Min() uint64 {
	low := m[0]
	for _, seq := range m[1:] {
		low = min(low, seq)
	}
	return low
}

// marks reads every lane's watermark of each identity.
func (s *Store) marks(ctx context.Context, ids []Identity) ([]Marks, error) {
	names, legacy := markNames(ids)
	var seqs []int64
	if err := s.pool.QueryRow(ctx, `SELECT `+readMarks(1), names, legacy).Scan(&seqs); err != nil {
		return nil, fmt.Errorf("read batch watermarks: %w", err)
	}
	return toMarks(seqs, len(ids))
}

func markNames(ids []Identity) (names []string, legacy []*string) {
	for _, id := range ids {
		for l := range Lanes {
			names = append(names, id.lane(l))
			legacy = append(legacy, id.legacy())
		}
	}
	return names, legacy
}

func toMarks(seqs []int64, n int) ([]Marks, error) {
	if len(seqs) != n*Lanes {
		return nil, fmt.Errorf("read batch watermarks: got %d, want %d", len(seqs), n*Lanes)
	}
	out := make([]Marks, n)
	for i, seq := range seqs {
		out[i/Lanes][i%Lanes] = uint64(seq)
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
