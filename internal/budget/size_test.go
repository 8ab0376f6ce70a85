package budget

import (
	"testing"
	"time"
)

func TestWant(t *testing.T) {
	t.Parallel()
	const iv = 100 * time.Millisecond
	for _, tc := range []struct {
		name    string
		n       int64
		rate    float64
		prev    int64
		prevAge time.Duration
		want    int64
	}{
		{"idle key asks for the smallest lease", 1, 0, 0, 0, minLease},
		{"TAKE n asks for at least n", 50, 0, 0, 0, 50},
		{"one interval of demand", 1, 10_000, 0, 0, 1000},
		{"rounds demand up", 1, 55, 0, 0, 6},
		{"a lease used up within an interval doubles", 1, 0, 64, 50 * time.Millisecond, 128},
		{"an old lease does not double", 1, 0, 64, time.Second, minLease},
		{"demand beats doubling", 1, 100_000, 64, 50 * time.Millisecond, 10_000},
		{"capped", 1, 1e12, 0, 0, maxLease},
		{"the cap never refuses a large n", maxLease + 5, 1e12, 0, 0, maxLease + 5},
	} {
		if got := want(tc.n, tc.rate, iv, tc.prev, tc.prevAge); got != tc.want {
			t.Errorf("%s: want(%d, %v, %v, %d, %v) = %d; want %d", tc.name, tc.n, tc.rate, iv, tc.prev, tc.prevAge, got, tc.want)
		}
	}
}

func TestGrantableShrinksNearZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		remaining, w, floor, want int64
	}{
		{1_000_000, 1000, 4, 1000}, // demand is the limit
		{1000, 1000, 4, 250},       // a quarter of the remainder
		{40, 1000, 4, 10},          // shrinking
		{16, 1000, 4, 4},           // the smallest lease
		{15, 1000, 4, 0},           // below it: direct
		{100, 1000, 30, 0},         // TAKE 30 needs a lease of 30
		{0, 1, 1, 0},               //
		{8, 1, leaseFloor(1), 0},   //
	} {
		if got := grantable(tc.remaining, tc.w, tc.floor); got != tc.want {
			t.Errorf("grantable(%d, %d, %d) = %d; want %d", tc.remaining, tc.w, tc.floor, got, tc.want)
		}
	}
}

func TestEWMA(t *testing.T) {
	t.Parallel()
	r := 0.0
	for range 20 {
		r = ewma(r, 100, 100*time.Millisecond)
	}
	if r < 990 || r > 1000 {
		t.Errorf("rate after 20 intervals of 100 units per 100ms = %v; want about 1000", r)
	}
}
