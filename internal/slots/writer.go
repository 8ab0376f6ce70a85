package slots

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Writers: how each kind gets into the database. Every kind family
// declares a Writer in its kind_*.go file, and a store writes the kinds
// of the Writers it is given (Options.Kinds, internal/catalog's list:
// no init side effects); a round is split among them by kind. The
// store's own counters (totals, windows) are written by one statement
// together, each family adding its CTE to it (inline); the others run
// statements of their own in the round's transaction, after its lanes
// moved (Exec). A round that needs no Exec is one statement that also
// moves its lanes; one that does is one transaction.

// Writer is what the store runs for one kind family's changes.
type Writer struct {
	// Name names the writer in errors.
	Name string
	// Kinds are the kinds it writes.
	Kinds []change.Kind
	// Order places its Exec among the others in a round's transaction:
	// at or below 0 before the round statement (the inline writers'
	// changes), above 0 after it; equal orders run in the order of
	// Options.Kinds.
	Order int
	// Exec writes a round's changes of its kinds, sorted by key, all of
	// lanes the round's transaction moved: exactly once. Nil for an
	// inline writer.
	Exec func(ctx context.Context, r *Round, changes []change.Change) error
	// Read is the SQL reading the stored value of key $1 for a kind
	// without buckets (ReadBuckets with from and to 0): at most one row,
	// with columns count (numeric or bigint) and variance (float8). It
	// runs in one statement with the read's watermarks.
	Read string

	// inline is the writer's CTE of the round statement, for the store's
	// own counters.
	inline *inlinePart
	// takes, when set, picks the changes the writer gets besides those
	// of its Kinds (COUNTERD_KEY_TTL's retention takes every write of a
	// key's value).
	takes func(s *Store, c change.Change) bool
	// whole says Exec takes a round's changes in one call however many
	// there are, bounding its statements itself (kind_once.go); other
	// Execs get pieces of at most the statement bound (bound.go).
	whole bool
	// readBuckets reads a kind's buckets, for the windowed kinds.
	readBuckets func(ctx context.Context, s *Store, key string, k change.Kind, from, to int64, ids []store.Identity) (store.BucketSnapshot, error)
	// rollup is the family's part of a rollup pass (rollup.go).
	rollup rollupPart
}

// Round is what an Exec writes with.
type Round struct {
	// Tx is the round's transaction.
	Tx pgx.Tx
	// Slots is how many slot rows one key may spread over.
	Slots int
	// Result counts what the round wrote; an Exec adds to it.
	Result *store.ApplyResult

	store *Store
}

// writerSet is a store's writers: those of its Options.Kinds and its own
// (keyTTLWriter), sorted by Order (list order within one), indexed by
// kind, with the round statements built for them.
type writerSet struct {
	list []*Writer
	// byKind lists, per kind, 1 + the index in list of its writer; 0
	// for none.
	byKind [256]int
	// takers are the indexes in list of the writers with takes.
	takers []int
	// statements caches the round statements built, by statementKey.
	statements sync.Map
}

// newWriterSet sorts ws by Order, keeping their order within one; it
// refuses a kind with two writers.
func newWriterSet(ws []Writer) (*writerSet, error) {
	ws = slices.Clone(ws)
	set := &writerSet{list: make([]*Writer, len(ws))}
	for i := range ws {
		set.list[i] = &ws[i]
	}
	if len(set.list) > 64 { // a round statement's parts are a uint64's bits
		return nil, fmt.Errorf("%d writers; a store takes at most 64", len(set.list))
	}
	slices.SortStableFunc(set.list, func(a, b *Writer) int { return cmp.Compare(a.Order, b.Order) })
	for j, w := range set.list {
		for _, k := range w.Kinds {
			if o := set.byKind[k]; o != 0 {
				return nil, fmt.Errorf("kind %v has two writers (%s, %s)", k, set.list[o-1].Name, w.Name)
			}
			set.byKind[k] = j + 1
		}
		if w.takes != nil {
			set.takers = append(set.takers, j)
		}
	}
	return set, nil
}

// of returns the writer of kind k, nil for none.
func (set *writerSet) of(k change.Kind) *Writer {
	if i := set.byKind[k]; i != 0 {
		return set.list[i-1]
	}
	return nil
}

// plan is one transaction's changes split among the writers (indexed as
// ws.list).
type plan struct {
	ws      *writerSet
	batches [][]laneChange
	exec    bool // some change needs an Exec
}

// plan splits changes among the writers, skipping those of lanes fresh
// says were written already (nil: none was).
func (s *Store) plan(changes []laneChange, fresh []bool) (plan, error) {
	p := plan{ws: s.ws, batches: make([][]laneChange, len(s.ws.list))}
	for i, n := range s.ws.batchSizes(changes, fresh) {
		if n > 0 && n == len(changes) && len(s.ws.takers) == 0 {
			// The common round: every change is one writer's (plain
			// increments) and no other writer looks at them. The writer
			// reads its batch; it need not be a copy.
			p.batches[i] = changes
			p.exec = s.ws.list[i].inline == nil
			return p, nil
		}
		if n > 0 {
			p.batches[i] = make([]laneChange, 0, n)
		}
	}
	for _, c := range changes {
		if fresh != nil && !fresh[c.lane-1] {
			continue
		}
		if err := p.route(s, c); err != nil {
			return p, err
		}
	}
	return p, nil
}

// batchSizes counts each writer's changes, so batches are sized before
// they are filled: a round has thousands of changes, and growing the
// batches by appending showed up as half again as many garbage
// collections at unpipelined INCR load.
func (set *writerSet) batchSizes(changes []laneChange, fresh []bool) []int {
	sizes := make([]int, len(set.list))
	for _, c := range changes {
		if i := set.byKind[c.Kind]; i != 0 && (fresh == nil || fresh[c.lane-1]) {
			sizes[i-1]++
		}
	}
	return sizes
}

// route adds c to its kind's writer and to every writer that takes it
// too.
func (p *plan) route(s *Store, c laneChange) error {
	i := p.ws.byKind[c.Kind]
	if i == 0 {
		return fmt.Errorf("write batch: key %q has kind %v, which this store cannot write", c.Key, c.Kind)
	}
	p.add(i-1, c)
	for _, j := range p.ws.takers {
		if p.ws.list[j].takes(s, c.Change) {
			p.add(j, c)
		}
	}
	return nil
}

func (p *plan) add(i int, c laneChange) {
	p.batches[i] = append(p.batches[i], c)
	p.exec = p.exec || p.ws.list[i].inline == nil
}

// runWriters writes p in tx, whose lanes moved already: every Exec in
// order, and the round statement (without lanes) at order 0.
func (s *Store) runWriters(ctx context.Context, tx pgx.Tx, p plan, res *store.ApplyResult) error {
	r := &Round{Tx: tx, Slots: s.slots, Result: res, store: s}
	inlineDone := false
	for i, w := range s.ws.list {
		if w.Order > 0 && !inlineDone {
			if err := s.inlineInTx(ctx, tx, p, res); err != nil {
				return err
			}
			inlineDone = true
		}
		if w.Exec == nil || len(p.batches[i]) == 0 {
			continue
		}
		cs := plainChanges(p.batches[i])
		size := s.rows
		if w.whole {
			size = len(cs)
		}
		err := pieces(len(cs), size, func(j int) bool { return cs[j].Key == cs[j-1].Key }, func(lo, hi int) error {
			return w.Exec(ctx, r, cs[lo:hi])
		})
		if err != nil {
			return fmt.Errorf("%s: %w", w.Name, err)
		}
	}
	if inlineDone {
		return nil
	}
	return s.inlineInTx(ctx, tx, p, res)
}

// inlineInTx runs the round statement for p's inline changes, if it has
// any, in tx: one statement for them all within the statement bound, else
// one per writer and piece of its changes, writer by writer, so rows are
// still locked table by table in key order, as the one statement does.
func (s *Store) inlineInTx(ctx context.Context, tx pgx.Tx, p plan, res *store.ApplyResult) error {
	n := 0
	for i, w := range s.ws.list {
		if w.inline != nil {
			n += len(p.batches[i])
		}
	}
	if n <= s.rows {
		return s.inlineStatement(ctx, tx, p, res)
	}
	for i, w := range s.ws.list {
		cs := p.batches[i]
		if w.inline == nil || len(cs) == 0 {
			continue
		}
		err := pieces(len(cs), s.rows, func(j int) bool { return cs[j].Key == cs[j-1].Key }, func(lo, hi int) error {
			one := plan{ws: s.ws, batches: make([][]laneChange, len(s.ws.list))}
			one.batches[i] = cs[lo:hi]
			return s.inlineStatement(ctx, tx, one, res)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// inlineStatement runs the round statement for p's inline changes, if it
// has any, in tx.
func (s *Store) inlineStatement(ctx context.Context, tx pgx.Tx, p plan, res *store.ApplyResult) error {
	parts, args := s.inlineArgs(p, nil, 0)
	if parts == 0 {
		return nil
	}
	var u, i, done int
	var held bool // always false: the statement resets expired keys
	if err := tx.QueryRow(ctx, s.ws.statement(parts, true), args...).Scan(&u, &i, &done, &held); err != nil {
		return err
	}
	res.Updated, res.Inserted = res.Updated+u, res.Inserted+i
	return nil
}

// plainChanges strips the lanes.
func plainChanges(lcs []laneChange) []change.Change {
	out := make([]change.Change, len(lcs))
	for i, c := range lcs {
		out[i] = c.Change
	}
	return out
}

// inlinePart is a writer's CTE of the round statement. It declares its
// parameters, and the statement numbers them as it composes the parts,
// after its own two ($1 the round's lanes, $2 its sequence number).
type inlinePart struct {
	// name is the CTE's name; it returns a boolean column created per
	// row written.
	name string
	// params are the SQL types of its parameters, in the order args
	// returns them.
	params []string
	// cte is its text, without the leading comma, given its parameters
	// as the statement numbers them: p[i] is params[i], cast to its
	// type ("$5::bigint[]"); lanesParam is the round's lanes (NULL:
	// write every change). With expiring it resets keys whose expiry has
	// passed (expire.go).
	cte func(p []string, expiring bool) string
	// args returns its parameters for changes, sorted by key.
	args func(s *Store, changes []laneChange) []any
}

// lanesParam is the round statement's lanes, in any part's text.
const lanesParam = "$1::text[]"

// text is the part's CTE with its parameters numbered from first, and
// the number after its last.
func (part *inlinePart) text(first int, expiring bool) (string, int) {
	p := make([]string, len(part.params))
	for i, typ := range part.params {
		p[i] = "$" + strconv.Itoa(first+i) + "::" + typ
	}
	return part.cte(p, expiring), first + len(p)
}

// inlineArgs returns which inline writers p has changes for (a bit per
// index of s.ws.list) and the round statement's arguments.
func (s *Store) inlineArgs(p plan, lanes []string, seq int64) (uint64, []any) {
	var mask uint64
	args := []any{pgx.QueryExecModeCacheDescribe, lanes, seq}
	for i, w := range s.ws.list {
		if w.inline == nil || len(p.batches[i]) == 0 {
			continue
		}
		mask |= 1 << i
		a := w.inline.args(s, p.batches[i])
		if len(a) != len(w.inline.params) {
			panic(fmt.Sprintf("BUG: writer %s declares %d parameters and passes %d", w.Name, len(w.inline.params), len(a)))
		}
		args = append(args, a...)
	}
	return mask, args
}

type statementKey struct {
	parts    uint64
	expiring bool
}

// statement is the round statement writing the inline writers of parts
// (a bit per index of set.list) in one INSERT each, counting what they
// wrote: advancedCTE, then fresh, then each writer's CTE in order, then
// the counts, and whether an expiry held it back. Without expiring it
// moves no lane while any key has an expiry (advancedUnlessExpiry), and
// says so, so that its caller runs it again with expiring (write.go): a
// round costs one statement, not a check of counter_expiry before it.
// It runs as an unnamed statement
// (QueryExecModeCacheDescribe), so PostgreSQL plans it for each round with
// the tables as they are: a generic plan cached while the slot table was
// tiny kept a sequential scan per key as it grew (a round of 2,000 keys
// over 100,000 rows took 32 s, not 40 ms).
func (set *writerSet) statement(parts uint64, expiring bool) string {
	key := statementKey{parts, expiring}
	if q, ok := set.statements.Load(key); ok {
		return q.(string)
	}
	var b strings.Builder
	advanced, held := advancedUnlessExpiry, expiryHeld
	if expiring {
		advanced, held = advancedCTE, "false"
	}
	b.WriteString(advanced)
	b.WriteString(freshCTE)
	next := 3 // $1 lanes, $2 seq
	var names []string
	for i, w := range set.list {
		if parts&(1<<i) == 0 {
			continue
		}
		text, n := w.inline.text(next, expiring)
		next = n
		b.WriteString(", ")
		b.WriteString(text)
		names = append(names, w.inline.name)
	}
	// A part with no change (a round whose changes all netted to nothing,
	// or no key in this part's lanes) still moves its lanes: the
	// statement is advanced and fresh alone, counting no row.
	from := "(SELECT NULL::boolean AS created WHERE false) AS nothing"
	if len(names) > 0 {
		from = names[0]
	}
	if len(names) > 1 {
		b.WriteString(", all_written AS (\n    SELECT created FROM ")
		b.WriteString(strings.Join(names, "\n    UNION ALL\n    SELECT created FROM "))
		b.WriteString("\n)")
		from = "all_written"
	}
	b.WriteString(`
SELECT count(*) FILTER (WHERE NOT created)::int, count(*) FILTER (WHERE created)::int,
       (coalesce(cardinality($1::text[]), 0) - (SELECT count(*) FROM advanced))::int, ` + held + `
FROM ` + from)
	q, _ := set.statements.LoadOrStore(key, b.String())
	return q.(string)
}
