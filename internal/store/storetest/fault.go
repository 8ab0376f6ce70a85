package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// errFault is the error FailWrites injects.
var errFault = errors.New("storetest: injected write fault")

// A round whose write fails after its lanes advanced, inside its
// transaction, commits nothing: no watermark moved, no change written;
// the retry of the same round id writes every change once. A lane
// advanced outside the round's transaction would commit alone, and the
// retry would skip that lane's changes.
var faults = []subtest{
	// Totals and buckets only: the single-statement round.
	{"FailedAfterLanesInline", func(t *testing.T, s Store) {
		keys := laneKeys("fi:", 2)
		failThenRetry(t, s, func(seq uint64) []change.Change {
			var b []change.Change
			for l := range store.Lanes {
				b = append(b, inc(keys[l][0], int64(seq)),
					change.Change{Key: keys[l][1], Kind: change.Minute, Bucket: t0, Delta: int64(seq)})
			}
			return b
		}, func(stage string, rounds uint64) {
			t.Helper()
			sum := int64(rounds * (rounds + 1) / 2)
			want := map[string]int64{}
			for l := range store.Lanes {
				want[keys[l][0]] = sum
				b := readBuckets(t, s, keys[l][1], change.Minute, t0, t0)
				if got := bucketTotal(b.Buckets); got != sum {
					t.Errorf("%s: %s minute bucket: got %d; want %d", stage, keys[l][1], got, sum)
				}
			}
			wantTotals(t, s, want)
		})
	}},
	// A SET beside the increments: the round's transaction, with a
	// statement of the SET's writer after the lanes moved.
	{"FailedAfterLanesTransaction", func(t *testing.T, s Store) {
		keys := laneKeys("ft:", 2)
		failThenRetry(t, s, func(seq uint64) []change.Change {
			var b []change.Change
			for l := range store.Lanes {
				b = append(b, inc(keys[l][0], int64(seq)),
					change.Change{Key: keys[l][1], Kind: change.Set, Delta: int64(seq) * 10})
			}
			return b
		}, func(stage string, rounds uint64) {
			t.Helper()
			want := map[string]int64{}
			for l := range store.Lanes {
				want[keys[l][0]] = int64(rounds * (rounds + 1) / 2)
				want[keys[l][1]] = int64(rounds) * 10
			}
			wantTotals(t, s, want)
		})
	}},
}

// failThenRetry commits round 1 of batch, fails round 2 with FailWrites,
// checks that nothing of it committed, and retries it twice: it must be
// written once, then found recorded. check(stage, n) checks the values
// after rounds 1 through n.
func failThenRetry(t *testing.T, s Store, batch func(seq uint64) []change.Change, check func(stage string, rounds uint64)) {
	id := func(seq uint64) store.BatchID { return round("f", "g", seq) }
	applyDup(t, s, id(1), false, batch(1)...)
	check("round 1", 1)

	s.FailWrites(errFault)
	_, err := s.ApplyOnce(testContext(t), id(2), slices.Clone(batch(2)))
	s.FailWrites(nil)
	if !errors.Is(err, errFault) {
		t.Fatalf("ApplyOnce of round 2 with a write fault: got %v; want the fault", err)
	}
	if m := marks(t, s, id(2).Identity); m != fill(1) {
		t.Errorf("watermarks after round 2 failed before commit: got %v; want 1 in every lane", m)
	}
	check("round 2 failed", 1)

	applyDup(t, s, id(2), false, batch(2)...)
	applyDup(t, s, id(2), true, batch(2)...)
	if m := marks(t, s, id(2).Identity); m != fill(2) {
		t.Errorf("watermarks after round 2's retry: got %v; want 2 in every lane", m)
	}
	check("round 2 retried", 2)
}

// bucketTotal sums a bucket read (0 for no bucket).
func bucketTotal(b []store.BucketValue) int64 {
	var n int64
	for _, v := range b {
		n += v.Total
	}
	return n
}
