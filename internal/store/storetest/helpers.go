package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// timeout bounds each subtest's calls: generous, for a loaded machine.
const timeout = 2 * time.Minute

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// round names round seq of instance's generation gen.
func round(instance, gen string, seq uint64) store.BatchID {
	return store.BatchID{Identity: store.Identity{Instance: instance, Generation: gen}, Seq: seq}
}

// apply writes batch as round id and fails the test on error.
func apply(t *testing.T, s store.Store, id store.BatchID, batch ...change.Change) store.ApplyResult {
	t.Helper()
	res, err := s.ApplyOnce(testContext(t), id, slices.Clone(batch))
	if err != nil {
		t.Fatalf("ApplyOnce(%v): %v", id, err)
	}
	return res
}

// applyDup writes batch as round id and checks whether the store found
// it already recorded in every lane.
func applyDup(t *testing.T, s store.Store, id store.BatchID, wantDup bool, batch ...change.Change) {
	t.Helper()
	if res := apply(t, s, id, batch...); res.Duplicate != wantDup {
		t.Fatalf("ApplyOnce(%v): duplicate %v; want %v", id, res.Duplicate, wantDup)
	}
}

func fold(t *testing.T, s Store) {
	t.Helper()
	if err := s.Fold(testContext(t)); err != nil {
		t.Fatalf("fold: %v", err)
	}
}

// read returns keys' estimates and ids' watermarks.
func read(t *testing.T, s store.Store, keys []string, ids ...store.Identity) store.Snapshot {
	t.Helper()
	snap, err := s.Read(testContext(t), keys, ids)
	if err != nil {
		t.Fatalf("Read(%q): %v", keys, err)
	}
	if len(snap.Estimates) != len(keys) || len(snap.Marks) != len(ids) {
		t.Fatalf("Read(%q, %d identities): %d estimates, %d watermarks; want %d, %d",
			keys, len(ids), len(snap.Estimates), len(snap.Marks), len(keys), len(ids))
	}
	if snap.KeyMarks != nil && len(snap.KeyMarks) != len(keys) {
		t.Fatalf("Read(%q): watermarks of %d keys", keys, len(snap.KeyMarks))
	}
	return snap
}

// totals returns keys' stored totals, failing on one beyond int64.
func totals(t *testing.T, s store.Store, keys ...string) []int64 {
	t.Helper()
	snap := read(t, s, keys)
	out := make([]int64, len(keys))
	for i, e := range snap.Estimates {
		if e.Wide != nil {
			t.Fatalf("%s: total %s beyond int64", keys[i], e.Wide)
		}
		out[i] = e.Total
	}
	return out
}

// wantTotals checks keys' stored totals.
func wantTotals(t *testing.T, s store.Store, want map[string]int64) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, got := range totals(t, s, keys...) {
		if got != want[keys[i]] {
			t.Errorf("%s: got %d; want %d", keys[i], got, want[keys[i]])
		}
	}
}

// marks returns id's watermarks.
func marks(t *testing.T, s store.Store, id store.Identity) store.Marks {
	t.Helper()
	return read(t, s, nil, id).Marks[0]
}

// laneKeys returns n keys with prefix in each lane: laneKeys(p, n)[l] are
// lane l's.
func laneKeys(prefix string, n int) [store.Lanes][]string {
	var out [store.Lanes][]string
	for i, full := 0, 0; full < store.Lanes; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		l := store.LaneOf(k)
		if len(out[l]) < n {
			out[l] = append(out[l], k)
			if len(out[l]) == n {
				full++
			}
		}
	}
	return out
}

// inc is an increment of key's total.
func inc(key string, n int64) change.Change {
	return change.Change{Key: key, Kind: change.Total, Delta: n}
}

// sortBuckets sorts a bucket read by start.
func sortBuckets(b []store.BucketValue) []store.BucketValue {
	slices.SortFunc(b, func(x, y store.BucketValue) int { return int(x.Start - y.Start) })
	return b
}

// t0 is 2026-03-01T10:00:00Z, the start of an hour; day0 is its day's.
const (
	t0   = 1_772_359_200
	day0 = 1_772_323_200
)

// readBuckets returns key's buckets of kind k starting from from
// through to, sorted by start, and ids' watermarks.
func readBuckets(t *testing.T, s store.Store, key string, k change.Kind, from, to int64, ids ...store.Identity) store.BucketSnapshot {
	t.Helper()
	snap, err := s.ReadBuckets(testContext(t), key, k, from, to, ids)
	if err != nil {
		t.Fatalf("ReadBuckets(%q, %v): %v", key, k, err)
	}
	if len(snap.Marks) != len(ids) {
		t.Fatalf("ReadBuckets(%q, %d identities): %d watermarks", key, len(ids), len(snap.Marks))
	}
	sortBuckets(snap.Buckets)
	return snap
}

// readTop is ReadTop, failing the test on error.
func readTop(t *testing.T, s store.Store, prefix string, k change.Kind, since int64, n int, keys []string, ids ...store.Identity) store.TopSnapshot {
	t.Helper()
	snap, err := s.ReadTop(testContext(t), prefix, k, since, n, keys, ids)
	if err != nil {
		t.Fatalf("ReadTop(%q, %v): %v", prefix, k, err)
	}
	if len(snap.Keys) != len(keys) || len(snap.Marks) != len(ids) {
		t.Fatalf("ReadTop(%q, %d keys, %d identities): %d counts, %d watermarks", prefix, len(keys), len(ids), len(snap.Keys), len(snap.Marks))
	}
	return snap
}
