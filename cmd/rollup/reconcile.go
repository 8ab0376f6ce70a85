package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/exposition"
	"github.com/counterd/counterd/internal/glob"
)

// Reconciling exact sets with the app's own membership table
// (ROLLUP_SET_RECONCILE, issue 35).
//
// A reconcile reads, in one REPEATABLE READ read-only transaction, the
// operator's query (the app's members, of the keys ROLLUP_SET_RECONCILE_KEYS
// matches) beside the keys of counterd's sets those patterns match, sorted
// by key in byte order, through a cursor (each FETCH a statement of its
// own, so ROLLUP_STATEMENT_TIMEOUT bounds a fetch, not the whole read). Its
// as_of is that transaction's start (it begins before the snapshot is
// taken) less ROLLUP_SET_RECONCILE_MARGIN. Keys go to
// counter_set_reconcile (migration 022) in chunks of about ROLLUP_CHUNK
// members, each chunk a transaction of its own on the pool's other
// connection, keys in byte order (the order rounds lock them in); a key the
// query has no row of is emptied. The function leaves a row decided at or
// after as_of alone, so SADD/SREM flowing meanwhile are never undone.

// setReconciler runs ROLLUP_SET_RECONCILE.
type setReconciler struct {
	query  string
	keys   *glob.Matcher
	likes  []string // the keys' patterns as LIKE patterns
	margin time.Duration
	every  time.Duration
	chunk  int

	mu   sync.Mutex
	last time.Time // when the last reconcile began

	reconcileMetrics
}

// reconcileMetrics are the reconcile's counters, registered whether or
// not ROLLUP_SET_RECONCILE is set (0 then), as every rollup metric is
// exposed from the start.
type reconcileMetrics struct {
	added, removed, checked, runs *metrics.Counter
}

func newReconcileMetrics(set *metrics.Set) reconcileMetrics {
	return reconcileMetrics{
		added: exposition.Counter(set, "counterd_rollup_set_reconcile_added_total",
			"Members a set reconcile (ROLLUP_SET_RECONCILE) added to counterd's exact sets: in the app's table, missing from counterd's set."),
		removed: exposition.Counter(set, "counterd_rollup_set_reconcile_removed_total",
			"Members a set reconcile (ROLLUP_SET_RECONCILE) removed from counterd's exact sets: in counterd's set, not in the app's table."),
		checked: exposition.Counter(set, "counterd_rollup_set_reconcile_keys_total",
			"Set keys a set reconcile (ROLLUP_SET_RECONCILE) compared with the app's table."),
		runs: exposition.Counter(set, "counterd_rollup_set_reconcile_runs_total",
			"Set reconciles (ROLLUP_SET_RECONCILE) that ran to the end."),
	}
}

// newSetReconciler returns nil when ROLLUP_SET_RECONCILE is unset.
func newSetReconciler(cfg config.Rollup, m reconcileMetrics) (*setReconciler, error) {
	query := strings.TrimRight(strings.TrimSpace(cfg.SetReconcile), "; \t\n")
	if query == "" {
		return nil, nil
	}
	keys, err := glob.Parse(cfg.SetReconcileKeys)
	if err != nil {
		return nil, usageError{fmt.Errorf("ROLLUP_SET_RECONCILE_KEYS: %w", err)}
	}
	var likes []string
	for p := range strings.SplitSeq(cfg.SetReconcileKeys, ",") {
		likes = append(likes, likePattern(strings.TrimSpace(p)))
	}
	return &setReconciler{query: query, keys: keys, likes: likes, margin: cfg.SetReconcileMargin,
		every: cfg.SetReconcileEvery, chunk: cfg.Chunk, reconcileMetrics: m}, nil
}

// likePattern turns a glob (* any run, ? one character) into a LIKE
// pattern with \ as its escape.
func likePattern(g string) string {
	var b strings.Builder
	for _, r := range g {
		switch r {
		case '*':
			b.WriteByte('%')
		case '?':
			b.WriteByte('_')
		case '%', '_', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// reconcileResult is what one reconcile did.
type reconcileResult struct {
	ran                  bool
	asOf                 time.Time
	keys, added, removed int64
	skipped, outside     int64 // rows of a bad key or member; rows of keys the patterns do not match
	chunks               int
	took                 time.Duration
	driftSample          []string // up to sampleKeys keys that had drift
	driftKeys            int64
}

// due says whether a pass at now reconciles: always with force (rollup
// once), else when ROLLUP_SET_RECONCILE_EVERY has passed since the last
// one began.
func (s *setReconciler) due(now time.Time, force bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !force && !s.last.IsZero() && now.Sub(s.last) < s.every {
		return false
	}
	s.last = now
	return true
}

// readSQL returns the app's rows of the covered keys, and a row with a
// NULL member for every covered key of counterd's that has a member, in
// byte order of key then member ($1: the LIKE patterns).
func (s *setReconciler) readSQL() string {
	return `DECLARE counterd_set_reconcile NO SCROLL CURSOR FOR
SELECT u.k, u.m, u.inside FROM (
    SELECT a.k::text AS k, a.m::bytea AS m, a.k::text LIKE ANY($1::text[]) AS inside
    FROM (` + s.query + `
    ) AS a(k, m)
    UNION ALL
    SELECT DISTINCT c.key, NULL::bytea, true FROM counter_set_members c
    WHERE c.key LIKE ANY($1::text[]) AND c.added_at IS NOT NULL
) AS u
ORDER BY u.k COLLATE "C", u.m NULLS FIRST`
}

// setKey is one key to reconcile and the app's members of it.
type setKey struct {
	key     string
	members [][]byte
}

// run reconciles every covered key. pool must have two connections: one
// reads, the other writes.
func (s *setReconciler) run(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (reconcileResult, error) {
	start := time.Now()
	res := reconcileResult{ran: true}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return res, fmt.Errorf("set reconcile: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// transaction_timestamp() is when the transaction began, before its
	// first statement takes the snapshot: a row the snapshot misses
	// committed after it, so its SADD/SREM was accepted after it too.
	var began time.Time
	if err := tx.QueryRow(ctx, `SELECT transaction_timestamp()`).Scan(&began); err != nil {
		return res, fmt.Errorf("set reconcile: %w", err)
	}
	res.asOf = began.Add(-s.margin)
	if _, err := tx.Exec(ctx, s.readSQL(), s.likes); err != nil {
		return res, fmt.Errorf("set reconcile: ROLLUP_SET_RECONCILE: %w", err)
	}
	var (
		cur     *setKey // the key being read
		pending []setKey
		size    int
	)
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := s.apply(ctx, pool, res.asOf, pending, &res); err != nil {
			return err
		}
		pending, size = pending[:0], 0
		return nil
	}
	done := func() error { // cur has all its rows
		if cur == nil {
			return nil
		}
		pending = append(pending, *cur)
		size += 1 + len(cur.members)
		cur = nil
		if size >= s.chunk {
			return flush()
		}
		return nil
	}
	for {
		rows, err := tx.Query(ctx, `FETCH 10000 FROM counterd_set_reconcile`)
		if err != nil {
			return res, fmt.Errorf("set reconcile: ROLLUP_SET_RECONCILE: %w", err)
		}
		n := 0
		for rows.Next() {
			n++
			var key *string
			var member []byte
			var inside *bool
			if err := rows.Scan(&key, &member, &inside); err != nil {
				rows.Close()
				return res, fmt.Errorf("set reconcile: %w", err)
			}
			switch {
			case key == nil || len(*key) < 1 || len(*key) > 256:
				res.skipped++
				continue
			case inside == nil || !*inside || !s.keys.Match(*key):
				res.outside++
				continue
			}
			if cur == nil || cur.key != *key {
				if err := done(); err != nil {
					rows.Close()
					return res, err
				}
				cur = &setKey{key: *key, members: [][]byte{}}
			}
			switch {
			case member == nil: // counterd has the key
			case len(member) < 1 || len(member) > 512:
				res.skipped++
			default:
				cur.members = append(cur.members, member)
			}
		}
		if err := rows.Err(); err != nil {
			return res, fmt.Errorf("set reconcile: ROLLUP_SET_RECONCILE: %w", err)
		}
		if n == 0 {
			break
		}
	}
	if err := done(); err != nil {
		return res, err
	}
	if err := flush(); err != nil {
		return res, err
	}
	res.took = time.Since(start).Round(time.Millisecond)
	s.runs.Inc()
	return res, nil
}

// apply reconciles keys (in byte order) in one transaction, again after
// a deadlock (a round whose operations on one key span statements can
// hold a slot row of the key the reconcile waits for), and counts what
// it repaired once it committed.
func (s *setReconciler) apply(ctx context.Context, pool *pgxpool.Pool, asOf time.Time, keys []setKey, res *reconcileResult) error {
	type repair struct{ added, removed int64 }
	var got []repair
	var err error
	for attempt := 1; ; attempt++ {
		got = got[:0]
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			for _, k := range keys {
				b.Queue(`SELECT added, removed FROM counter_set_reconcile($1, $2, $3)`, k.key, k.members, asOf)
			}
			br := tx.SendBatch(ctx, b)
			for range keys {
				var r repair
				if err := br.QueryRow().Scan(&r.added, &r.removed); err != nil {
					br.Close()
					return err
				}
				got = append(got, r)
			}
			return br.Close()
		})
		var pgErr *pgconn.PgError
		if err == nil || attempt == 3 || !errors.As(err, &pgErr) || (pgErr.Code != "40P01" && pgErr.Code != "40001") {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("set reconcile of %d keys from %q: %w", len(keys), keys[0].key, err)
	}
	res.chunks++
	for i, r := range got {
		res.keys++
		res.added += r.added
		res.removed += r.removed
		if r.added+r.removed > 0 {
			res.driftKeys++
			if len(res.driftSample) < sampleKeys {
				res.driftSample = append(res.driftSample, keys[i].key)
			}
		}
		s.added.Add(int(r.added))
		s.removed.Add(int(r.removed))
	}
	s.checked.Add(len(keys))
	return nil
}

// log reports a reconcile: a warning when it repaired anything (drift
// means members were lost or added behind counterd's back), else info.
func (res reconcileResult) log(ctx context.Context, log *slog.Logger) {
	if !res.ran {
		return
	}
	attrs := []any{"keys", res.keys, "added", res.added, "removed", res.removed, "as_of", res.asOf,
		"chunks", res.chunks, "skipped_rows", res.skipped, "outside_rows", res.outside, "took", res.took}
	if res.added+res.removed > 0 {
		log.WarnContext(ctx, "set reconcile repaired drift from the app's table",
			append(attrs, "drift_keys", res.driftKeys, "sample", res.driftSample)...)
		return
	}
	log.InfoContext(ctx, "set reconcile", attrs...)
}
