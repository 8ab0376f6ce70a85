package change

import "testing"

func TestGrantKind(t *testing.T) {
	t.Parallel()
	if !Grant.Valid() || Grant.String() != "grant" || Grant.Windowed() {
		t.Errorf("Grant: valid %v, name %q, windowed %v; want valid, \"grant\", not windowed", Grant.Valid(), Grant.String(), Grant.Windowed())
	}
	if Kind(8).Valid() {
		t.Error("kind 8 is valid; want unknown")
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
