// Package kindtest proves that a kind of counter is a leaf: "max", a kind
// declared only in this file, goes from an accepted change through the
// journal (written, reopened and replayed), the accumulator (netting, and
// reads of what is pending), the PostgreSQL store (written once per
// round, a replayed round a no-op) and back to a read, with no line of
// change, journal, pending or slots written for it.
package kindtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// TestMain registers the kind, explicitly, before any test uses it: the
// kinds of the product are listed in internal/change (kinds.go), and a
// test's kind is added with change.Register.
func TestMain(m *testing.M) {
	change.Register(Max, maxSpec())
	goleak.VerifyTestMain(m)
}

// Max is a cell that keeps the largest value it was given, from 0: a
// change's Delta is a value, not an increment.
const Max change.Kind = 200

// maxSpec is the kind's declaration.
func maxSpec() change.Spec {
	return change.Spec{
		Name: "max",
		Merge: func(n change.Net, ch change.Change) (change.Net, bool) {
			return change.Net{N: max(n.N, ch.Delta), Kind: ch.Kind}, true
		},
		Check: func(ch change.Change) error {
			if ch.Bucket != 0 || ch.Delta < 0 {
				return fmt.Errorf("max takes a value of 0 or more and no bucket, got %d (bucket %d)", ch.Delta, ch.Bucket)
			}
			return nil
		},
		Read: func(r *change.Reading, n change.Net) { r.N = max(r.N, n.N) },
	}
}

// maxWriter writes the kind into the table the test creates; the test's
// store takes it besides the daemon's list (catalog.Writers).
var maxWriter = slots.Writer{
	Name:  "max",
	Kinds: []change.Kind{Max},
	Order: 3,
	Exec: func(ctx context.Context, r *slots.Round, cs []change.Change) error {
		keys, values := make([]string, len(cs)), make([]int64, len(cs))
		for i, c := range cs {
			keys[i], values[i] = c.Key, c.Delta
		}
		_, err := r.Tx.Exec(ctx, writeMax, keys, values)
		return err
	},
	Read: `SELECT value AS count, 0::float8 AS variance FROM kindtest_max WHERE key = $1`,
}

// maxTable is the kind's table; writes counts the rounds that wrote each
// key, so a round written twice shows.
const maxTable = `CREATE TABLE kindtest_max (key text PRIMARY KEY, value bigint NOT NULL, writes int NOT NULL)`

const writeMax = `
INSERT INTO kindtest_max AS m (key, value, writes)
SELECT k, v, 1 FROM unnest($1::text[], $2::bigint[]) AS x(k, v)
ON CONFLICT (key) DO UPDATE SET value = greatest(m.value, excluded.value), writes = m.writes + 1`

func TestMaxRoundTrip(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := pgtest.New(t, pgtest.Options{})
	if _, err := db.Pool.Exec(ctx, maxTable); err != nil {
		t.Fatal(err)
	}
	st, err := slots.New(db.Pool, slots.Options{Kinds: append(catalog.Writers(), maxWriter)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jr, _ := openJournal(t, dir)
	id := store.Identity{Instance: jr.InstanceID(), Generation: jr.Generation()}
	b := pending.New(st, pending.Options{Journal: jr, Identity: id})
	value := func(b *pending.Buffer, key string, want int64) {
		t.Helper()
		got, err := b.Value(ctx, Max, key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Total != want {
			t.Fatalf("max of %q: got %d; want %d", key, got.Total, want)
		}
	}
	accept := func(b *pending.Buffer, items ...change.Change) error {
		t.Helper()
		_, err := b.AddGroup(items, make([]error, len(items)))
		return err
	}

	// Accepted, netted and read before any round is written; the other
	// key and a plain increment share the record.
	for _, v := range []int64{5, 3, 9, 7} {
		if err := accept(b, mx("a", v), change.Change{Key: "a", Kind: change.Total, Delta: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := accept(b, mx("b", 0)); err != nil {
		t.Fatal(err)
	}
	if err := accept(b, mx("a", -1)); err == nil {
		t.Fatal("a negative max was accepted; want its check to refuse it")
	}
	value(b, "a", 9)
	value(b, "b", 0)

	// The journal nets the segment as the accumulator did: one change per
	// cell, in order of first appearance.
	if err := jr.Close(); err != nil {
		t.Fatal(err)
	}
	jr, segs := openJournal(t, dir)
	t.Cleanup(func() { jr.Close() })
	if len(segs) != 1 {
		t.Fatalf("recovered segments: got %d; want 1", len(segs))
	}
	want := []change.Change{mx("a", 9), {Key: "a", Kind: change.Total, Delta: 4}, mx("b", 0)}
	if got := segs[0].Changes; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed segment: got %v; want %v", got, want)
	}

	// A restart writes the replayed round once; replaying it again is a
	// no-op in the store.
	round := store.BatchID{Identity: store.Identity{Instance: jr.InstanceID(), Generation: segs[0].Generation}, Seq: segs[0].Seq}
	b = pending.New(st, pending.Options{Journal: jr, Identity: store.Identity{Instance: jr.InstanceID(), Generation: jr.Generation()},
		Recovered: []pending.Recovered{{ID: round, Changes: segs[0].Changes}}})
	value(b, "a", 9) // read from the replayed round, before it is written
	stop := run(t, b)
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := st.ApplyOnce(ctx, round, segs[0].Changes)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Duplicate {
		t.Errorf("replay of a committed round: got %+v; want Duplicate", res)
	}
	var stored, writes int64
	if err := db.Pool.QueryRow(ctx, `SELECT value, writes FROM kindtest_max WHERE key = 'a'`).Scan(&stored, &writes); err != nil {
		t.Fatal(err)
	}
	if stored != 9 || writes != 1 {
		t.Fatalf("stored max of a: got %d after %d writes; want 9 after 1", stored, writes)
	}
	if got, err := b.Get(ctx, []string{"a"}); err != nil || got[0] != 4 {
		t.Fatalf("total of a: got %v, %v; want 4", got, err)
	}

	// Reads merge what is stored with what is pending by the kind's rule.
	value(b, "a", 9)
	if err := accept(b, mx("a", 4)); err != nil {
		t.Fatal(err)
	}
	value(b, "a", 9)
	if err := accept(b, mx("a", 12)); err != nil {
		t.Fatal(err)
	}
	value(b, "a", 12)
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	value(b, "a", 12)
	stop()
}

func mx(key string, v int64) change.Change { return change.Change{Key: key, Kind: Max, Delta: v} }

// openJournal opens the journal in dir, as a start does, and returns the
// segments it recovered.
func openJournal(t *testing.T, dir string) (*journal.Journal, []journal.Segment) {
	t.Helper()
	jr, segs, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return jr, segs
}

// run runs b's flusher until the returned stop is called.
func run(t *testing.T, b *pending.Buffer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, pending.DrainAfter(ctx, 10*time.Second)) }()
	return func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
	}
}
