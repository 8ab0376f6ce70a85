package slots

import (
	"context"
	"fmt"
	"math/big"

	"github.com/counterd/counterd/internal/store"

	"github.com/jackc/pgx/v5"
)

// Read returns, in one statement and so from one snapshot, each key's
// stored estimate (a key never counted is exactly 0) and the watermarks of
// ids' lanes. A caller holding rounds in memory adds a round to a key only
// if its sequence number is above the watermark of the key's lane: a round
// is in the totals exactly when its lane's watermark has reached it.
func (s *Store) Read(ctx context.Context, keys []string, ids []store.Identity) (store.Snapshot, error) {
	snap := store.Snapshot{Estimates: make([]store.Estimate, len(keys))}
	names, legacy := markNames(ids)
	if len(keys) == 0 {
		var err error
		snap.Marks, err = s.marks(ctx, ids)
		return snap, err
	}
	rows, err := s.pool.Query(ctx, readEstimates, keys, names, legacy)
	if err != nil {
		return snap, fmt.Errorf("query: %w", err)
	}
	var (
		ord   int64
		total *int64
		wide  *string
		v     float64
		seqs  []int64
		exp   *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &total, &wide, &v, &seqs, &exp}, func() error {
		e := &snap.Estimates[ord-1]
		e.Var = v
		if exp != nil {
			e.Expires = *exp
		}
		switch {
		case total != nil:
			e.Total = *total
		case wide != nil:
			w, ok := new(big.Int).SetString(*wide, 10)
			if !ok {
				return fmt.Errorf("total %q of key %q is not an integer", *wide, keys[ord-1])
			}
			e.Wide = w
		}
		if ord == 1 {
			var merr error
			snap.Marks, merr = toMarks(seqs, len(ids))
			return merr
		}
		return nil
	})
	if err != nil {
		return snap, fmt.Errorf("scan: %w", err)
	}
	return snap, nil
}

// Estimates returns what counter_estimates says for each key.
func (s *Store) Estimates(ctx context.Context, keys []string) ([]store.Estimate, error) {
	snap, err := s.Read(ctx, keys, nil)
	return snap.Estimates, err
}

// Totals returns base plus slots for each key; a key never counted is 0,
// and a total beyond int64 is an error wrapping ErrOverflow.
func (s *Store) Totals(ctx context.Context, keys []string) ([]int64, error) {
	est, err := s.Estimates(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(keys))
	for i, e := range est {
		if e.Wide != nil {
			return nil, fmt.Errorf("total of %q is %s: %w", keys[i], e.Wide, store.ErrOverflow)
		}
		out[i] = e.Total
	}
	return out, nil
}

// readEstimates is counter_estimates for a list of keys, written per key
// so each is an index lookup rather than an aggregate over the whole view,
// with the watermarks of the lanes in $2 on the first row, and each key's
// expiry (unix ms; a key past it reads as 0 with no expiry).
var readEstimates = `
SELECT k.ord,
       CASE WHEN e.total BETWEEN -9223372036854775808 AND 9223372036854775807 THEN e.total::bigint END,
       CASE WHEN e.total NOT BETWEEN -9223372036854775808 AND 9223372036854775807 THEN e.total::text END,
       e.var,
       CASE WHEN k.ord = 1 THEN ` + readMarks(2) + ` END,
       CASE WHEN NOT x.gone THEN x.ms END
FROM unnest($1::text[]) WITH ORDINALITY AS k(key, ord)
LEFT JOIN LATERAL (
    SELECT (extract(epoch FROM x.expires_at) * 1000)::bigint AS ms, x.expires_at <= now() AS gone
    FROM counter_expiry x WHERE x.key = k.key
) AS x ON true
CROSS JOIN LATERAL (
    SELECT coalesce(sum(n), 0) AS total, coalesce(sum(v), 0)::float8 AS var FROM (
        SELECT c.total AS n, c.variance AS v FROM counters c WHERE c.key = k.key
        UNION ALL
        SELECT cs.count, cs.variance FROM counter_slots cs WHERE cs.key = k.key
    ) AS parts
    WHERE x.gone IS NOT TRUE
) AS e`

// Overflows returns how many keys have a rolled-up total beyond int64
// (the counter_overflows view, an index scan of a partial index).
func (s *Store) Overflows(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM counter_overflows`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count totals beyond int64: %w", err)
	}
	return n, nil
}
