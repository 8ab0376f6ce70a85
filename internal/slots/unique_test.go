package slots_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hll"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// members returns the changes adding name(i) for i in [from, to) to key,
// and the sketch Go builds of them.
func members(key string, from, to int) ([]change.Change, *hll.Sketch) {
	sk := hll.NewDefault()
	var cs []change.Change
	for i := from; i < to; i++ {
		h := hll.Hash(fmt.Appendf(nil, "m%d", i))
		sk.Add(h)
		cs = append(cs, change.Member(key, h))
	}
	return cs, sk
}

// Sketches are written once per round (a replay is a no-op), read back as
// the sketch Go builds of the same members and as the one SQL builds,
// counted by counter_uniques before and after the rollup folds them, and
// unioned across keys in SQL as in Go.
func TestUniques(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := newStore(t, 4)
	id := store.BatchID{Identity: store.Identity{Instance: "u"}, Seq: 1}
	a1, _ := members("a", 0, 60)
	a2, _ := members("a", 40, 100)
	_, wantA := members("a", 0, 100)
	bs, wantB := members("b", 50, 3000)
	mustApply(t, s, id, append(a1, bs...)...)
	res, err := s.ApplyOnce(ctx, id, append(a1, bs...))
	if err != nil || !res.Duplicate {
		t.Fatalf("replayed round: got %+v, %v; want Duplicate", res, err)
	}
	id.Seq++
	mustApply(t, s, id, a2...)

	checkStored(t, s, db, "slot rows", wantA, wantB)
	if _, err := s.Fold(ctx, slots.FoldOptions{}); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counter_unique_slots`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("sketch slot rows left after a fold: got %d; want 0", left)
	}
	checkStored(t, s, db, "folded", wantA, wantB)
	// A round after the fold adds to the folded sketch.
	id.Seq++
	more, _ := members("a", 100, 110)
	mustApply(t, s, id, more...)
	for _, c := range more {
		wantA.Add(uint64(c.Bucket))
	}
	got, err := s.ReadMembers(ctx, change.Unique, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	sk, err := hll.Parse(got[0])
	if err != nil || sk.Estimate() != 110 {
		t.Fatalf("a after a round past the fold: got %v, %v; want 110", sk, err)
	}
}

// A round of many changes to one key (4,500 members: ApplyOnce splits it
// over parts by change count, and every change is in one lane) leaves a
// part without changes; it still moves its lanes, and a replay of the
// round is a no-op.
func TestUniquesOneKeyManyMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, 4)
	id := store.BatchID{Identity: store.Identity{Instance: "one"}, Seq: 1}
	cs, want := members("k", 0, 4500)
	mustApply(t, s, id, cs...)
	if res, err := s.ApplyOnce(ctx, id, cs); err != nil || !res.Duplicate {
		t.Fatalf("replayed round: got %+v, %v; want Duplicate", res, err)
	}
	got, err := s.ReadMembers(ctx, change.Unique, []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := want.MarshalBinary()
	if !bytes.Equal(got[0], wb) {
		t.Fatal("stored sketch differs from the Go sketch of the same members")
	}
}

// checkStored checks the stored sketches of a (members 0-99) and b (50-2,999)
// against the Go sketches, the extension's hll_add_agg, counter_uniques
// and hll_union_agg.
func checkStored(t *testing.T, s *slots.Store, db *pgtest.DB, stage string, wantA, wantB *hll.Sketch) {
	t.Helper()
	ctx := context.Background()
	got, err := s.ReadMembers(ctx, change.Unique, []string{"a", "b", "none"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []*hll.Sketch{wantA, wantB} {
		wb, _ := want.MarshalBinary()
		if !bytes.Equal(got[i], wb) {
			t.Errorf("%s: stored sketch %d: got %x; want %x", stage, i, got[i][:min(16, len(got[i]))], wb[:16])
		}
	}
	if got[2] != nil {
		t.Errorf("%s: sketch of a key without members: got %x; want none", stage, got[2])
	}
	// The extension builds the same bytes from the same members.
	var same bool
	if err := db.Pool.QueryRow(ctx, `
		SELECT public.hll_add_agg(public.hll_hash_bytea(convert_to('m' || i, 'UTF8')), 14, 5, -1, 1)::text
		     = (SELECT sketch FROM counter_unique_sketch_text(ARRAY['a']))
		FROM generate_series(0, 99) AS i`).Scan(&same); err != nil {
		t.Fatal(err)
	}
	if !same {
		t.Errorf("%s: stored sketch of a differs from hll_add_agg of its members", stage)
	}
	est := sqlEstimates(t, db, "a", "b", "none")
	if est["a"] != 100 || est["none"] != 0 || est["b"] < 2950*0.97 || est["b"] > 2950*1.03 {
		t.Errorf("%s: counter_uniques: got %v; want a 100, b 2950 ± 3%%, none 0", stage, est)
	}
	// hll_union_agg over the stored sketches of both keys is the
	// union Go makes of them.
	var union string
	if err := db.Pool.QueryRow(ctx, `SELECT public.hll_union_agg(sketch::public.hll)::text FROM counter_unique_sketch_text(ARRAY['a', 'b'])`).Scan(&union); err != nil {
		t.Fatal(err)
	}
	u := wantA.Clone()
	if err := u.Union(wantB); err != nil {
		t.Fatal(err)
	}
	ub, _ := u.MarshalBinary()
	if union != fmt.Sprintf(`\x%x`, ub) {
		t.Errorf("%s: hll_union_agg of a and b differs from the Go union", stage)
	}
}

// sqlEstimates is counter_uniques of keys, by key.
func sqlEstimates(t *testing.T, db *pgtest.DB, keys ...string) map[string]float64 {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT key, estimate FROM counter_uniques($1)`, keys)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	est := map[string]float64{}
	for rows.Next() {
		var k string
		var e float64
		if err := rows.Scan(&k, &e); err != nil {
			t.Fatal(err)
		}
		est[k] = e
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return est
}
