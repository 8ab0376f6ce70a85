package slots

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hll"
)

// Unique members (change.Unique) are written as postgresql-hll sketches
// (sql/014_uniques.up.sql): a round's members of a key, one hash each,
// become one sketch, built here (internal/hll: the bytes hll_add_agg makes
// of the same hashes, so PostgreSQL parses and unions one sketch a key
// rather than aggregating every member), unioned (hll_union) into one of
// the key's slot rows (sql/017_unique_sketch_write.up.sql), in the round's
// transaction after its lanes moved, so a lane's members are written
// exactly once. Union is idempotent besides, so a member written twice
// would not change the sketch; exactly once is what keeps the slot rows
// from being rewritten for nothing on a replay. The rollup folds slot
// rows into counter_unique_sketches (foldUniques, its hook in Fold).
//
// UniquesWriter is the Writer of unique members (change.Unique), with its
// rollup fold, one of a store's Options.Kinds.
func UniquesWriter() Writer {
	return Writer{Name: "uniques", Kinds: []change.Kind{change.Unique}, Order: 3, Exec: writeUniques,
		rollup: rollupPart{fold: (*Store).foldUniques}}
}

// writeUniques writes a round's members, sorted by key: each key's go to
// one random slot row as one sketch.
func writeUniques(ctx context.Context, r *Round, cs []change.Change) error {
	var keys []string
	var slots []int16
	var sketches [][]byte
	var buf []byte // every sketch's bytes, one after another
	sk := hll.NewDefault()
	for i, c := range cs {
		sk.Add(uint64(c.Bucket))
		if i+1 < len(cs) && cs[i+1].Key == c.Key {
			continue
		}
		start := len(buf)
		var err error
		if buf, err = sk.AppendBinary(buf); err != nil {
			return fmt.Errorf("sketch of %q: %w", c.Key, err)
		}
		keys, slots = append(keys, c.Key), append(slots, int16(rand.IntN(r.Slots)))
		sketches = append(sketches, buf[start:len(buf):len(buf)])
		sk.Reset()
	}
	var n int
	if err := r.Tx.QueryRow(ctx, `SELECT counter_uniques_write_sketches($1, $2, $3)`, keys, slots, sketches).Scan(&n); err != nil {
		return fmt.Errorf("write %d members of %d keys: %w", len(cs), len(keys), err)
	}
	r.Result.Updated += n
	return nil
}

// ReadMembers returns each key's stored sketch of kind k (change.Unique)
// in postgresql-hll's storage format, folded and not, unioned; nil for a
// key without one.
func (s *Store) ReadMembers(ctx context.Context, k change.Kind, keys []string) ([][]byte, error) {
	if k != change.Unique {
		return nil, fmt.Errorf("read members: the store keeps no members of kind %v", k)
	}
	return s.readSketches(ctx, `SELECT sketch FROM counter_unique_sketch_text($1)`, len(keys), keys)
}

// readSketches runs query, which returns want rows of one column, a
// sketch in hll's text form or NULL, and returns their bytes.
func (s *Store) readSketches(ctx context.Context, query string, want int, args ...any) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([][]byte, 0, want)
	for rows.Next() {
		var text *string
		if err := rows.Scan(&text); err != nil {
			return nil, err
		}
		if text == nil {
			out = append(out, nil)
			continue
		}
		b, err := hex.DecodeString(strings.TrimPrefix(*text, `\x`))
		if err != nil {
			return nil, fmt.Errorf("read members: sketch text %.20q: %w", *text, err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) != want {
		return nil, fmt.Errorf("read members: %d sketches for %d keys", len(out), want)
	}
	return out, nil
}

// uniqueFoldRows is how many sketch slot rows one fold statement takes.
const uniqueFoldRows = 1000

// maxUniqueFolds bounds the statements one Fold runs for sketches; what
// is left waits for the next Fold.
const maxUniqueFolds = 1000

// foldUniques unions sketch slot rows into counter_unique_sketches
// (counter_uniques_fold), at the end of each Fold.
func (s *Store) foldUniques(ctx context.Context) error {
	if _, err := s.foldSketches(ctx, `SELECT counter_uniques_fold($1)`); err != nil {
		return fmt.Errorf("fold sketches: %w", err)
	}
	return nil
}

// foldSketches runs query, a fold of at most $1 sketch slot rows
// returning how many rows (or keys) it folded, a statement per
// uniqueFoldRows rows, until it folds none (every row left is held by a
// round) or maxUniqueFolds statements ran; it returns the sum.
func (s *Store) foldSketches(ctx context.Context, query string) (int64, error) {
	var total int64
	for range maxUniqueFolds {
		var n int
		if err := s.pool.QueryRow(ctx, query, uniqueFoldRows).Scan(&n); err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
		total += int64(n)
	}
	return total, nil
}
