package slots

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/change"
)

// keyedChanges returns n changes over keys keys in a seeded random
// order, each with its index as Bucket.
func keyedChanges(n, keys int) []laneChange {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(keys)))
	cs := make([]laneChange, n)
	for i := range cs {
		cs[i] = laneChange{Change: change.Member(fmt.Sprintf("u:%d", rng.IntN(keys)), uint64(i))}
	}
	return cs
}

// sortByKey orders changes by key as strings.Compare does, whether keys
// repeat a lot (members) or hardly (counters), and keeps a key's changes
// in their order.
func TestSortByKey(t *testing.T) {
	t.Parallel()
	f := func(n, keys int) {
		t.Helper()
		cs := keyedChanges(n, keys)
		want := slices.Clone(cs)
		slices.SortStableFunc(want, func(a, b laneChange) int { return strings.Compare(a.Key, b.Key) })
		got := sortByKey(cs)
		if len(got) != len(want) {
			t.Fatalf("%d changes over %d keys: got %d; want %d", n, keys, len(got), len(want))
		}
		for i := range want {
			if got[i].Key != want[i].Key || (keys*4 <= n && got[i].Bucket != want[i].Bucket) {
				t.Fatalf("%d changes over %d keys: at %d got %s #%d; want %s #%d", n, keys, i, got[i].Key, got[i].Bucket, want[i].Key, want[i].Bucket)
			}
		}
	}
	f(0, 1)
	f(10, 3)
	f(1000, 1)
	f(10000, 1000)
	f(10000, 9000)
	f(70000, 1000)
	f(49000, 1_000_000)
	f(5000, 4000) // repeats in the sample, mostly distinct overall

	// Keys longer than the 16 bytes the radix sort looks at, sharing them,
	// and keys differing only in trailing zero bytes.
	rng := rand.New(rand.NewPCG(3, 4))
	var cs []laneChange
	for i := range 3000 {
		var k string
		switch i % 3 {
		case 0:
			k = fmt.Sprintf("counterd:views:post:%d", rng.IntN(100000))
		case 1:
			k = strings.Repeat("\x00", rng.IntN(3)) + fmt.Sprintf("%c", 'a'+rng.IntN(3)) + strings.Repeat("\x00", rng.IntN(20))
		default:
			k = fmt.Sprintf("p:%d", rng.IntN(1_000_000))
		}
		cs = append(cs, laneChange{Change: change.Change{Key: k, Kind: change.Total, Bucket: int64(i)}})
	}
	want := slices.Clone(cs)
	slices.SortStableFunc(want, func(a, b laneChange) int { return strings.Compare(a.Key, b.Key) })
	got := sortByKey(cs)
	for i := range want {
		if got[i].Key != want[i].Key || got[i].Bucket != want[i].Bucket {
			t.Fatalf("long and zero-padded keys: at %d got %q #%d; want %q #%d", i, got[i].Key, got[i].Bucket, want[i].Key, want[i].Bucket)
		}
	}
}

// BenchmarkSortByKey sorts a round of unique members as make bench's
// uniques section makes them (65,000 over 1,000 keys), a round of
// counters as its latency section makes them at 50,000 INCR/s (49,000
// keys, nearly all distinct), and the same with long keys sharing a long
// prefix, and in 20 groups sharing one each, by sortByKey and by sorting
// the changes in place.
func BenchmarkSortByKey(b *testing.B) {
	for _, c := range []struct {
		name    string
		n, keys int
		prefix  string
	}{
		{"members", 65000, 1000, ""},
		{"counters", 49000, 1_000_000, ""},
		{"long-prefix", 49000, 1_000_000_000, "counterd:views:post:"},
		{"grouped", 49000, 1_000_000_000, "tenant:%d:counterd:views:post:"},
	} {
		cs := keyedChanges(c.n, c.keys)
		if c.prefix != "" {
			rng := rand.New(rand.NewPCG(5, 6))
			for i := range cs {
				p := c.prefix
				if strings.Contains(p, "%d") {
					p = fmt.Sprintf(p, rng.IntN(20))
				}
				cs[i].Key = p + strconv.Itoa(rng.IntN(c.keys))
			}
		}
		work := make([]laneChange, len(cs))
		b.Run(c.name+"/sortByKey", func(b *testing.B) {
			for b.Loop() {
				copy(work, cs)
				sortByKey(work)
			}
		})
		b.Run(c.name+"/SortFunc", func(b *testing.B) {
			for b.Loop() {
				copy(work, cs)
				slices.SortFunc(work, func(a, b laneChange) int { return strings.Compare(a.Key, b.Key) })
			}
		})
	}
}
