package change

import "testing"

// A member is valid with any hash (negative as int64 too); repeats of one
// member in a round net into one cell, other members into cells of their
// own; a change without a positive count is refused.
func TestUniqueKind(t *testing.T) {
	t.Parallel()
	if Unique.Additive() != true || Unique.Windowed() || Unique.String() != "unique" {
		t.Fatalf("Unique: additive %v, windowed %v, name %q", Unique.Additive(), Unique.Windowed(), Unique.String())
	}
	a, b := Member("k", 1<<63|5), Member("k", 7)
	for _, c := range []Change{a, b} {
		if err := c.Check(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range []Change{{Key: "k", Kind: Unique, Bucket: 3}, {Key: "k", Kind: Unique, Bucket: 3, Delta: 1, Var: 1}} {
		if c.Check() == nil {
			t.Errorf("%+v accepted; want refused", c)
		}
	}
	if a.Cell() == b.Cell() {
		t.Fatal("two members share a cell")
	}
	var n Net
	for range 3 {
		if !Fold(&n, a, nil) {
			t.Fatal("fold refused")
		}
	}
	if got := n.Change(a.Cell()); got != (Change{Key: "k", Kind: Unique, Bucket: a.Bucket, Delta: 3}) || got.Check() != nil || !n.Written() {
		t.Fatalf("three adds of one member: got %+v (written %v)", got, n.Written())
	}
}
