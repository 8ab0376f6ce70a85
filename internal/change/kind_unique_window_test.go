package change

import "testing"

func TestBucketMember(t *testing.T) {
	t.Parallel()
	f := func(w Kind, start int64, want Kind) {
		t.Helper()
		c := BucketMember("post:1", w, start, 1<<63+5)
		if c.Kind != want || c.Check() != nil || !c.Kind.Additive() || c.Kind.Windowed() {
			t.Fatalf("BucketMember(%v): kind %v, check %v", w, c.Kind, c.Check())
		}
		u, err := UniqueBucketOf(c)
		if err != nil {
			t.Fatal(err)
		}
		if u != (UniqueBucket{Key: "post:1", Window: w, Start: start, Hash: 1<<63 + 5}) {
			t.Fatalf("UniqueBucketOf(BucketMember(%v, %d)): got %+v", w, start, u)
		}
	}
	f(Minute, 1_772_359_800, UniqueMinute)
	f(Hour, 1_772_359_200, UniqueHour)
	f(Day, 1_772_323_200, UniqueDay)

	// One member in two buckets, or two widths, is never one cell.
	a := BucketMember("k", Hour, 3600, 7)
	if a.Cell() == BucketMember("k", Hour, 7200, 7).Cell() || a.Cell() == BucketMember("k", Minute, 3600, 7).Cell() {
		t.Fatal("one member in two buckets or widths shares a cell")
	}
	if a.Cell() != BucketMember("k", Hour, 3600, 7).Cell() {
		t.Fatal("repeats of a member in one bucket are two cells")
	}

	for _, c := range []Change{
		{Key: "k", Kind: UniqueHour, Delta: 1},                                  // too short
		{Key: BucketMember("k", Hour, 3600, 1).Key, Kind: Unique, Delta: 1},     // not windowed
		{Key: BucketMember("k", Minute, 60, 1).Key, Kind: UniqueHour, Delta: 1}, // 60 is no hour's start
	} {
		if _, err := UniqueBucketOf(c); err == nil {
			t.Errorf("UniqueBucketOf(%+v): no error", c)
		}
	}
	if (Change{Key: a.Key, Kind: UniqueDay, Delta: 0}).Check() == nil {
		t.Error("a windowed member added 0 times passed Check")
	}
}

// The unique kinds declare what the shared code asks of a member kind:
// that their changes are members, which member kind each window keeps,
// where a cell's bucket start is, and a member's change in a bucket.
func TestUniqueMemberSpecs(t *testing.T) {
	t.Parallel()
	for _, k := range []Kind{Unique, UniqueMinute, UniqueHour, UniqueDay} {
		if !k.Members() {
			t.Errorf("%v.Members(): got false; want true", k)
		}
	}
	for _, k := range []Kind{Total, Minute, Set, Once, 0, 200} {
		if k.Members() {
			t.Errorf("%v.Members(): got true; want false", k)
		}
	}
	f := func(w Kind, want Kind) {
		t.Helper()
		got, ok := MembersIn(w)
		if got != want || ok != (want != 0) {
			t.Errorf("MembersIn(%v): got %v, %v; want %v", w, got, ok, want)
		}
		if want == 0 {
			return
		}
		m := Unique.Spec().InBucket(Change{Key: "post:1", Kind: Unique, Bucket: 9, Delta: 3}, w, 86400)
		if want := BucketMember("post:1", w, 86400, 9); m.Kind != want.Kind || m.Key != want.Key || m.Bucket != 9 || m.Delta != 3 {
			t.Errorf("Unique's InBucket(%v): got %+v; want %+v with Delta 3", w, m, want)
		}
		key, start, ok := got.Spec().Start(m.Key)
		if key != "post:1" || start != 86400 || !ok {
			t.Errorf("%v's Start(%q): got %q, %d, %v; want post:1, 86400, true", got, m.Key, key, start, ok)
		}
	}
	f(Minute, UniqueMinute)
	f(Hour, UniqueHour)
	f(Day, UniqueDay)
	f(Total, 0)
	f(0, 0)

	in := Total.Spec().InBucket(Change{Key: "k", Kind: Total, Delta: 20, Var: 380}, Hour, 3600)
	if in != (Change{Key: "k", Kind: Hour, Bucket: 3600, Delta: 20, Var: 380}) {
		t.Errorf("Total's InBucket: got %+v", in)
	}
	for _, k := range []Kind{Minute, Set, Once, UniqueHour} {
		if k.Spec().InBucket != nil {
			t.Errorf("%v has InBucket; want none (windows do not expand it)", k)
		}
	}
}

// A second member kind kept per minute would make MembersIn ambiguous:
// registering it panics, and registers nothing.
func TestRegisterSecondMembersOfWindow(t *testing.T) {
	t.Parallel()
	const k Kind = 250
	defer func() {
		if recover() == nil {
			t.Error("a second member kind per minute bucket registered; want a panic")
		}
		if k.Valid() {
			t.Error("the refused kind is registered")
		}
	}()
	Register(k, Spec{Name: "second_minute_members", Members: true, Window: Minute, Start: BucketStart})
}
