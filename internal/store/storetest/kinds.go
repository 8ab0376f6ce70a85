package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Every kind the store writes, read back as the daemon reads it. Budget
// grants are in grants.go.
var kinds = []subtest{
	{"Total", func(t *testing.T, s Store) {
		wantTotals(t, s, map[string]int64{"nope": 0, "nope:2": 0}) // never counted
		id := func(seq uint64) store.BatchID { return round("t", "g", seq) }
		apply(t, s, id(1), inc("a", 5), change.Change{Key: "b", Kind: change.Total, Delta: -3, Var: 1.5})
		apply(t, s, id(2), inc("a", -7), change.Change{Key: "b", Kind: change.Total, Delta: 10, Var: 2})
		fold(t, s)
		apply(t, s, id(3), inc("a", 1))
		snap := read(t, s, []string{"a", "b", "c"})
		for i, want := range []store.Estimate{{Total: -1}, {Total: 7, Var: 3.5}, {}} {
			if got := snap.Estimates[i]; got.Total != want.Total || got.Var != want.Var || got.Wide != nil || got.Expires != 0 {
				t.Errorf("key %d: got %+v; want %+v", i, got, want)
			}
		}
	}},
	{"Windows", func(t *testing.T, s Store) {
		id := func(seq uint64) store.BatchID { return round("w", "g", seq) }
		bucket := func(key string, k change.Kind, start, n int64) change.Change {
			return change.Change{Key: key, Kind: k, Bucket: start, Delta: n}
		}
		apply(t, s, id(1),
			bucket("p:1", change.Minute, t0+60, 3), bucket("p:1", change.Minute, t0+120, 2),
			bucket("p:1", change.Hour, t0, 5), bucket("p:1", change.Day, day0, 5),
			change.Change{Key: "p:2", Kind: change.Hour, Bucket: t0, Delta: 7, Var: 42},
			bucket("p:3", change.Hour, t0-3600, 50), bucket("p:3", change.Hour, t0, 1),
			bucket("q:1", change.Hour, t0, 100))
		fold(t, s)
		apply(t, s, id(2), bucket("p:1", change.Minute, t0+60, 4), bucket("p:1", change.Hour, t0, 4),
			bucket("p:1", change.Day, day0, 4), bucket("p:4", change.Hour, t0, 3), bucket("p:4", change.Hour, t0+3600, -3))
		f := func(key string, k change.Kind, from, to int64, want ...store.BucketValue) {
			t.Helper()
			if got := readBuckets(t, s, key, k, from, to).Buckets; !slices.Equal(got, want) {
				t.Errorf("ReadBuckets(%s, %v, %d..%d): got %v; want %v", key, k, from, to, got, want)
			}
		}
		f("p:1", change.Minute, t0, t0+3600, store.BucketValue{Start: t0 + 60, Total: 7}, store.BucketValue{Start: t0 + 120, Total: 2})
		f("p:1", change.Minute, t0+60, t0+60, store.BucketValue{Start: t0 + 60, Total: 7}) // both ends included
		f("p:1", change.Minute, t0+61, t0+119)
		f("p:1", change.Hour, t0-3600, t0+3600, store.BucketValue{Start: t0, Total: 9})
		f("p:1", change.Day, day0, day0, store.BucketValue{Start: day0, Total: 9})
		f("p:2", change.Hour, t0, t0, store.BucketValue{Start: t0, Total: 7, Var: 42})
		f("p:2", change.Minute, t0, t0+3600) // kinds are separate
		f("never", change.Hour, t0, t0+3600)
		// Buckets leave the key's total alone.
		wantTotals(t, s, map[string]int64{"p:1": 0, "p:2": 0})

		// Top: largest first over the buckets starting at or after since,
		// only keys with the prefix, a key netting to 0 left out.
		top := readTop(t, s, "p:", change.Hour, t0, 10, []string{"p:3", "p:4", "never", "q:1"})
		if want := []store.KeyTotal{{Key: "p:1", Total: 9}, {Key: "p:2", Total: 7}, {Key: "p:3", Total: 1}}; !slices.Equal(top.Top, want) {
			t.Errorf("ReadTop(p:, hour, since t0): got %v; want %v", top.Top, want)
		}
		if want := []int64{1, 0, 0, 100}; !slices.Equal(top.Keys, want) {
			t.Errorf("ReadTop's counts of p:3, p:4, never, q:1 since t0: got %v; want %v", top.Keys, want)
		}
		top = readTop(t, s, "p:", change.Hour, t0-3600, 2, []string{"p:3"})
		if want := []store.KeyTotal{{Key: "p:3", Total: 51}, {Key: "p:1", Total: 9}}; !slices.Equal(top.Top, want) || top.Keys[0] != 51 {
			t.Errorf("ReadTop(p:, hour, since t0-1h, 2): got %v, %v; want %v, [51]", top.Top, top.Keys, want)
		}
		top = readTop(t, s, "", change.Minute, t0, 10, nil)
		if want := []store.KeyTotal{{Key: "p:1", Total: 9}}; !slices.Equal(top.Top, want) {
			t.Errorf("ReadTop(all keys, minute): got %v; want %v", top.Top, want)
		}
	}},
	{"Set", func(t *testing.T, s Store) {
		id := func(seq uint64) store.BatchID { return round("s", "g", seq) }
		apply(t, s, id(1), change.Change{Key: "k", Kind: change.Total, Delta: 40, Var: 9}, inc("other", 2))
		fold(t, s)
		apply(t, s, id(2), inc("k", 2))
		apply(t, s, id(3), change.Change{Key: "k", Kind: change.Set, Delta: -5}, change.Change{Key: "new", Kind: change.Set, Delta: 8})
		snap := read(t, s, []string{"k", "new", "other"})
		for i, want := range []int64{-5, 8, 2} {
			if e := snap.Estimates[i]; e.Total != want || (i < 2 && e.Var != 0) {
				t.Errorf("key %d after SET: got %+v; want total %d (variance 0 for a SET)", i, e, want)
			}
		}
		apply(t, s, id(4), change.Change{Key: "k", Kind: change.Set}) // DEL
		wantTotals(t, s, map[string]int64{"k": 0, "new": 8, "other": 2})
	}},
	{"Expire", func(t *testing.T, s Store) {
		id := store.BatchID{Identity: store.Identity{Instance: "e", Generation: "g"}}
		next := func(cs ...change.Change) {
			t.Helper()
			id.Seq++
			apply(t, s, id, cs...)
		}
		expire := func(key string, at int64) change.Change {
			return change.Change{Key: key, Kind: change.Expire, Delta: at}
		}
		future := time.Now().Add(time.Hour).Unix()
		past := time.Now().Add(-time.Second).Unix()
		next(inc("a", 5), inc("b", 6), inc("c", 7))
		next(expire("a", future), expire("b", future), expire("c", future))
		snap := read(t, s, []string{"a", "b", "c"})
		for i, e := range snap.Estimates {
			if e.Total != int64(5+i) || e.Expires != future*1000 {
				t.Errorf("key %d before its expiry: got %+v; want total %d expiring at %d", i, e, 5+i, future*1000)
			}
		}
		fold(t, s)
		next(inc("a", 1)) // beside what the fold moved
		// a's expiry passes, b's is removed (PERSIST), c's moves.
		next(expire("a", past), expire("b", 0), expire("c", future+60))
		snap = read(t, s, []string{"a", "b", "c"})
		for i, want := range []store.Estimate{{}, {Total: 6}, {Total: 7, Expires: (future + 60) * 1000}} {
			if e := snap.Estimates[i]; e.Total != want.Total || e.Expires != want.Expires {
				t.Errorf("key %d: got %+v; want %+v", i, e, want)
			}
		}
		fold(t, s)
		if got := totals(t, s, "a")[0]; got != 0 {
			t.Errorf("expired key after a fold: got %d; want 0", got)
		}
		// The next write of an expired key starts a new life.
		next(inc("a", 2))
		if e := read(t, s, []string{"a"}).Estimates[0]; e.Total != 2 || e.Expires != 0 {
			t.Errorf("increment after expiry: got %+v; want 2 with no expiry (a new life)", e)
		}
	}},
}
