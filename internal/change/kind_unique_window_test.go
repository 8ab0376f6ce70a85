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
