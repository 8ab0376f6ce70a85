package slots

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/change"
)

// Totals (change.Total) are written by the round statement's written CTE.
//
// For each key whose lane is fresh, in the sorted order of the keys, the
// subqueries lock the first slot row no other transaction holds (FOR
// UPDATE SKIP LOCKED never waits), looking from the writer's home slot
// up and then from 0 (Store.home), and the insert conflicts with that
// row and adds to it; a key with no free row gets its row in the home
// slot, or, when the home row exists (and so is held), is upserted into
// the caller's random other slot, which may wait for its holder. Where
// nothing is free from the home up, one unlocked probe (e: the key's
// highest slot at or below the home) tells a new key, which takes the
// home at once, from one with rows below the home: a new key costs two
// index probes, not three (BenchmarkSlotPick: 27 → 20 µs of PostgreSQL
// CPU a new key; the pick from 0 that homes replaced, 14).
// Daemons of a fleet have different homes (most of them: each picks its
// home at random when it starts), so their rounds writing one popular
// key start from different rows and seldom meet: with every daemon
// starting at slot 0 (as before), 32 daemons' rounds queued behind each
// other's locks (docs/performance.md, Fleet). One daemon alone writes
// each key into one row. The executor takes one key at a time (no sort
// between the join and the insert, and fresh is a one-off InitPlan
// rather than a join), so a writer only ever waits while holding rows of
// smaller keys and writers cannot form a lock cycle. Counts are numeric:
// no sum can overflow, so no key can make a round fail.
//
// TotalsWriter is the Writer of totals (change.Total): its part of the
// round statement, one of a store's Options.Kinds.
func TotalsWriter() Writer {
	return Writer{
		Name:   "totals",
		Kinds:  []change.Kind{change.Total},
		inline: &totalsPart,
	}
}

// totalsPart is the totals' part of the round statement.
var totalsPart = inlinePart{
	name:   "written",
	params: []string{"text[]", "bigint[]", "float8[]", "smallint[]", "smallint[]", "smallint"},
	cte:    totalsCTE,
	args: func(s *Store, cs []laneChange) []any {
		b := newBatchArrays(len(cs))
		for _, c := range cs {
			b.add(c.Change, s.fallbackSlot())
			b.lanes[len(b.lanes)-1] = c.lane
		}
		return []any{b.keys, b.deltas, b.vars, b.fallback, b.lanes, s.home}
	},
}

// The totals' parameters, as totalsPart declares them: arrays of the
// keys, deltas, variances, fallback slots and lanes, then the home slot.
const (
	totalKeys = iota
	totalDeltas
	totalVars
	totalFallback
	totalLanes
	totalHome
)

// totalsCTE is the written CTE over parameters p, with resetExpired when
// expiring: a key's stored total is then subtracted from the slot row its
// delta goes to when its expiry has passed. Both are built by
// totalsInsert, so they cannot drift apart.
func totalsCTE(p []string, expiring bool) string {
	if !expiring {
		return totalsInsert(p, " b.n, b.v")
	}
	return resetExpired(p[totalKeys], p[totalLanes]) + ", " + totalsInsert(p, `
           b.n - coalesce((SELECT r.n FROM reset r WHERE r.key = b.key), 0),
           b.v - coalesce((SELECT r.v FROM reset r WHERE r.key = b.key), 0)`)
}

// totalsInsert is the written CTE over parameters p, amounts being what
// it adds.
func totalsInsert(p []string, amounts string) string {
	home := p[totalHome]
	return `written AS (
    INSERT INTO counter_slots AS cs (key, slot, count, variance)
    SELECT b.key, coalesce(f.slot, CASE WHEN e.top IS NULL THEN ` + home + ` ELSE coalesce((
        SELECT s.slot FROM counter_slots s
        WHERE s.key = b.key AND s.slot < ` + home + `
        ORDER BY s.slot
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ), CASE WHEN e.top = ` + home + ` THEN b.fallback ELSE ` + home + ` END) END),` + amounts + `
    FROM unnest(` + strings.Join(p[totalKeys:totalHome], ", ") + `)
        AS b(key, n, v, fallback, lane)
    LEFT JOIN LATERAL (
        SELECT s.slot FROM counter_slots s
        WHERE s.key = b.key AND s.slot >= ` + home + `
        ORDER BY s.slot
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS f ON true
    LEFT JOIN LATERAL (
        SELECT s.slot AS top FROM counter_slots s
        WHERE f.slot IS NULL AND s.key = b.key AND s.slot <= ` + home + `
        ORDER BY s.slot DESC
        LIMIT 1
    ) AS e ON true
    WHERE ` + lanesParam + ` IS NULL OR (SELECT lanes FROM fresh)[b.lane]
    ON CONFLICT (key, slot) DO UPDATE
    SET count = cs.count + excluded.count, variance = cs.variance + excluded.variance
    RETURNING cs.xmax = 0 AS created
)`
}

// batchArrays are a statement's parameters, one element per key.
type batchArrays struct {
	keys     []string
	deltas   []int64
	vars     []float64
	fallback []int16 // a random slot other than the home
	lanes    []int16 // all 1 unless set: the round statement without lanes ignores them
}

// newBatchArrays returns arrays with room for n keys.
func newBatchArrays(n int) batchArrays {
	return batchArrays{
		keys: make([]string, 0, n), deltas: make([]int64, 0, n), vars: make([]float64, 0, n),
		fallback: make([]int16, 0, n), lanes: make([]int16, 0, n),
	}
}

func (b *batchArrays) add(c change.Change, fallback int16) {
	b.keys = append(b.keys, c.Key)
	b.deltas = append(b.deltas, c.Delta)
	b.vars = append(b.vars, c.Var)
	b.fallback = append(b.fallback, fallback)
	b.lanes = append(b.lanes, 1)
}

// decided is a change of a key's total that a round decided in its
// transaction (an INCRONCE view that counted, a set member added or
// removed): delta at accept time at (unix microseconds).
type decided struct {
	key   string
	at    int64
	delta int64
}

// addDecided adds ds (sorted by key) to their keys' slot rows with the
// totals' written CTE (with or without its expiry reset), to their keys'
// time buckets of each one's accept time (COUNTERD_WINDOWS) with the
// windows' CTE, as INCR's round statement does, and moves their keys'
// idle expiry (COUNTERD_KEY_TTL); every lane of these changes is fresh
// already. what names them in errors.
func addDecided(ctx context.Context, r *Round, ds []decided, what string) error {
	return addDecidedReset(ctx, r, ds, what, true)
}

// addDecidedReset is addDecided; without reset, its statement never
// resets a key whose expiry passed (exact sets reset theirs, members and
// all, before deciding: renewExpiredSets), and it asks nothing about
// expiries.
func addDecidedReset(ctx context.Context, r *Round, ds []decided, what string, reset bool) error {
	totals, buckets := decidedChanges(r.store, ds)
	if len(totals) == 0 && len(buckets) == 0 {
		return nil
	}
	b := newBatchArrays(len(totals))
	for _, c := range totals {
		b.add(c, r.store.fallbackSlot())
	}
	args := []any{nil, b.keys, b.deltas, b.vars, b.fallback, b.lanes, r.store.home}
	if len(buckets) > 0 {
		var bb bucketBatch
		for _, c := range buckets {
			bb.add(r.store, laneChange{Change: c, lane: 1})
		}
		args = append(args, bb.args(r.store.home)...)
	}
	expiring := false
	if reset {
		var err error
		if expiring, err = r.store.anyExpiry(ctx); err != nil {
			return err
		}
	}
	var u, i int
	if err := r.Tx.QueryRow(ctx, decidedTotals(expiring, len(buckets) > 0), args...).Scan(&u, &i); err != nil {
		return fmt.Errorf("add %s: %w", what, err)
	}
	r.Result.Updated, r.Result.Inserted = r.Result.Updated+u, r.Result.Inserted+i
	if err := retainDecided(ctx, r, totals); err != nil {
		return fmt.Errorf("key ttl of %s: %w", what, err)
	}
	return nil
}

// retainDecided moves the idle expiry (COUNTERD_KEY_TTL) of the keys of
// decided changes, as a write of their totals does (retain.go), after
// the statement that reset those whose expiry passed.
func retainDecided(ctx context.Context, r *Round, totals []change.Change) error {
	if r.store.keyTTL == nil {
		return nil
	}
	var keep []change.Change
	for _, c := range totals {
		if r.store.keyTTL(c.Key) > 0 {
			keep = append(keep, c)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	return retain(ctx, r, keep)
}

// decidedChanges nets ds (sorted by key) into changes of their keys'
// totals and of their buckets of each width the key's windows have (at
// each one's accept time), sorted by key; a net of 0 writes nothing.
func decidedChanges(s *Store, ds []decided) (totals, buckets []change.Change) {
	at := make(map[change.ID]int) // index in buckets
	for i, d := range ds {
		if i == 0 || d.key != ds[i-1].key {
			totals = append(totals, change.Change{Key: d.key, Kind: change.Total})
		}
		totals[len(totals)-1].Delta += d.delta
		if s.retention == nil {
			continue
		}
		for _, k := range []change.Kind{change.Minute, change.Hour, change.Day} {
			if _, ok := s.retention(d.key, k); !ok {
				continue
			}
			w := int64(k.Width() / time.Second)
			sec := time.UnixMicro(d.at).Unix()
			id := change.ID{Key: d.key, Kind: k, Bucket: sec - sec%w} // accept times are after 1970
			j, ok := at[id]
			if !ok {
				j = len(buckets)
				at[id] = j
				buckets = append(buckets, change.Change{Key: id.Key, Kind: k, Bucket: id.Bucket})
			}
			buckets[j].Delta += d.delta
		}
	}
	zero := func(c change.Change) bool { return c.Delta == 0 }
	return slices.DeleteFunc(totals, zero), slices.DeleteFunc(buckets, zero)
}

// decidedTotals is the totals' written CTE, and with buckets the windows'
// bucket_written, as a statement of its own: $1 (the lanes) is NULL, so
// they write every change and fresh is never read.
func decidedTotals(expiring, buckets bool) string {
	text, next := totalsPart.text(2, expiring)
	q := `WITH fresh AS (SELECT NULL::boolean[] AS lanes), ` + text
	from := "written"
	if buckets {
		more, _ := bucketsPart.text(next, expiring)
		q += ", " + more
		from = "(SELECT created FROM written UNION ALL SELECT created FROM bucket_written) AS w"
	}
	return q + `
SELECT count(*) FILTER (WHERE NOT created)::int, count(*) FILTER (WHERE created)::int FROM ` + from
}
