package change

import "testing"

func TestGrantKind(t *testing.T) {
	t.Parallel()
	if !Grant.Valid() || Grant.String() != "grant" || Grant.Windowed() {
		t.Errorf("Grant: valid %v, name %q, windowed %v; want valid, \"grant\", not windowed", Grant.Valid(), Grant.String(), Grant.Windowed())
	}
	if Kind(199).Valid() {
		t.Error("kind 199 is valid; want unknown")
	}
	for _, tc := range []struct {
		kind   Kind
		bucket int64
		ok     bool
	}{
		{Grant, 1, true},    // a lease id
		{Grant, 0, false},   // a grant needs its lease
		{Grant, -5, false},  //
		{Total, 0, true},    //
		{Total, 60, false},  //
		{Minute, 120, true}, //
	} {
		if err := tc.kind.CheckBucket(tc.bucket); (err == nil) != tc.ok {
			t.Errorf("%v.CheckBucket(%d) = %v; want ok %v", tc.kind, tc.bucket, err, tc.ok)
		}
	}
}

// cells is a round's nets for Fold, in a map.
type cells map[ID]*Net

func (cs cells) Lookup(id ID) *Net { return cs[id] }

// fold nets changes as the journal and the accumulator do.
func (cs cells) fold(t *testing.T, chs ...Change) {
	t.Helper()
	for _, ch := range chs {
		id := ch.Cell()
		n := cs[id]
		if n == nil {
			n = &Net{}
			cs[id] = n
		}
		if !Fold(n, ch, cs) {
			t.Fatalf("Fold(%v): overflow", ch)
		}
	}
}

// Each kind nets by its Spec: increments add, a Set lands on its key's
// total, replaces it and cancels an earlier expiry, an Expire replaces.
func TestFold(t *testing.T) {
	t.Parallel()
	f := func(name string, in []Change, want map[ID]Net) {
		t.Helper()
		cs := cells{}
		cs.fold(t, in...)
		if len(cs) != len(want) {
			t.Errorf("%s: got %d cells; want %d", name, len(cs), len(want))
		}
		for id, w := range want {
			if got := cs[id]; got == nil || *got != w {
				t.Errorf("%s: cell %v: got %v; want %v", name, id, got, w)
			}
		}
	}
	tot := ID{Key: "a", Kind: Total}
	exp := ID{Key: "a", Kind: Expire}
	f("increments add", []Change{{Key: "a", Kind: Total, Delta: 2, Var: 1}, {Key: "a", Kind: Total, Delta: 3}},
		map[ID]Net{tot: {N: 5, V: 1, Kind: Total}})
	f("set then incr", []Change{{Key: "a", Kind: Set, Delta: 5}, {Key: "a", Kind: Total, Delta: 2}},
		map[ID]Net{tot: {N: 7, Kind: Set}})
	f("incr then set", []Change{{Key: "a", Kind: Total, Delta: 2}, {Key: "a", Kind: Set, Delta: 5}},
		map[ID]Net{tot: {N: 5, Kind: Set}})
	f("set cancels an earlier expiry", []Change{{Key: "a", Kind: Expire, Delta: 100}, {Key: "a", Kind: Set, Delta: 3}},
		map[ID]Net{tot: {N: 3, Kind: Set}, exp: {Kind: Expire}})
	f("expire after set stays", []Change{{Key: "a", Kind: Set, Delta: 3}, {Key: "a", Kind: Expire, Delta: 300}},
		map[ID]Net{tot: {N: 3, Kind: Set}, exp: {N: 300, Kind: Expire}})
	f("buckets are cells of their own", []Change{{Key: "a", Kind: Minute, Bucket: 60, Delta: 1}, {Key: "a", Kind: Minute, Bucket: 120, Delta: 1}},
		map[ID]Net{{Key: "a", Kind: Minute, Bucket: 60}: {N: 1, Kind: Minute}, {Key: "a", Kind: Minute, Bucket: 120}: {N: 1, Kind: Minute}})

	cs := cells{}
	cs.fold(t, Change{Key: "a", Kind: Total, Delta: 1 << 62})
	if Fold(cs[tot], Change{Key: "a", Kind: Total, Delta: 1 << 62}, cs) || cs[tot].N != 1<<62 {
		t.Errorf("an overflowing increment: got %v; want refused, the net unchanged", cs[tot])
	}
}

// A read folds pending nets by their kinds' rules: a Set replaces the
// value and drops the expiry, an Expire sets it, increments add exactly
// past int64.
func TestReadingFold(t *testing.T) {
	t.Parallel()
	r := Reading{N: 1<<63 - 1, Expires: 5000}
	r.Fold(Net{N: 1, Kind: Total})
	if r.Wide == nil || r.Wide.String() != "9223372036854775808" {
		t.Fatalf("past int64: got %v, %v; want wide 9223372036854775808", r.N, r.Wide)
	}
	r.Fold(Net{N: -1, Kind: Total})
	if r.Wide != nil || r.N != 1<<63-1 {
		t.Fatalf("back within int64: got %v, %v; want %d", r.N, r.Wide, int64(1<<63-1))
	}
	r.Fold(Net{N: 7, V: 2, Kind: Set})
	if r != (Reading{N: 7, V: 2}) {
		t.Fatalf("after a Set: got %+v; want N 7, V 2, no expiry", r)
	}
	r.Fold(Net{N: 10, Kind: Expire})
	if r.Expires != 10000 {
		t.Fatalf("after an Expire: got expires %d; want 10000", r.Expires)
	}
	if got := Reads(Total); len(got) != 2 || got[0] != Total || got[1] != Expire {
		t.Fatalf("Reads(Total): got %v; want [total expire]", got)
	}
}
