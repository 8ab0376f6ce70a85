package slots

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
)

// sortByKey sorts cs by key, as write needs (every writer locks rows in
// key order), keeping a key's changes in their order. Counters' keys
// hardly repeat within a part: they are sorted by reference and gathered
// (sortDistinct; a comparison sort of the changes in place took 15-50 ms
// of a 49,000-key round at 50,000 INCR/s in an instrumented build, while
// the event loop waited for a core). A part of unique members holds many
// changes a key (one a distinct member), where comparing keys in a
// general sort cost more than the rest of writing them; so when a sample
// of the changes repeats keys it sorts the distinct keys and places each
// change by its key's rank. The order of keys is strings.Compare's either
// way.
func sortByKey(cs []laneChange) []laneChange {
	if len(cs) < 64 {
		slices.SortStableFunc(cs, func(a, b laneChange) int { return strings.Compare(a.Key, b.Key) })
		return cs
	}
	if !repeatsKeys(cs[:min(len(cs), repeatSample)]) {
		return sortDistinct(cs)
	}
	rank := make(map[string]int32, 64)
	ranks := make([]int32, len(cs))
	var keys []string
	for i, c := range cs {
		r, ok := rank[c.Key]
		if !ok {
			r = int32(len(keys))
			rank[c.Key] = r
			keys = append(keys, c.Key)
		}
		ranks[i] = r
	}
	if 4*len(keys) > len(cs) {
		// Keys mostly distinct after all: the general sort is cheaper.
		return sortDistinct(cs)
	}
	order := make([]int32, len(keys)) // first-seen index -> sorted position
	byName := make([]int32, len(keys))
	for i := range byName {
		byName[i] = int32(i)
	}
	slices.SortFunc(byName, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
	for pos, r := range byName {
		order[r] = int32(pos)
	}
	start := make([]int, len(keys)+1) // counting sort by sorted position
	for _, r := range ranks {
		start[order[r]+1]++
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	out := make([]laneChange, len(cs))
	for i, c := range cs {
		p := order[ranks[i]]
		out[start[p]] = c
		start[p]++
	}
	return out
}

// repeatSample is how many changes repeatsKeys looks at: members repeat
// their keys within a few hundred, counters over a round's keys do not.
const repeatSample = 512

// repeatsKeys reports whether two of cs share a key.
func repeatsKeys(cs []laneChange) bool {
	seen := make(map[string]struct{}, len(cs))
	for _, c := range cs {
		if _, ok := seen[c.Key]; ok {
			return true
		}
		seen[c.Key] = struct{}{}
	}
	return false
}

// sortDistinct returns cs sorted by key (a key's changes in their order).
// It sorts references to the changes that carry 16 bytes of each key, those
// after the prefix every key shares ("post:", "counterd:views:post:"), as
// two words and no pointer: most comparisons are two integer compares
// within the slice being sorted, where sorting the changes compares keys
// that miss the cache. BenchmarkSortByKey, 49,000 keys, against sorting
// the changes themselves: "u:N" 13.9-14.3 against 17.5-17.6 ms,
// "counterd:views:post:N" 10.9-11.6 against 17.4-18 ms. Keys in groups
// with long shared prefixes ("tenant:7:counterd:views:post:N") tie in
// their words within a group and compare through the reference, a cache
// miss more: 21.7-26 against 21.8-22.4 ms. (A reference holding its key's
// string cost twice as much to move, in write barriers; a
// least-significant-byte radix sort on the words was 1.3x slower on
// grouped keys, and 4x slower on "counterd:views:post:N" before it
// skipped the shared prefix.)
func sortDistinct(cs []laneChange) []laneChange {
	refs := make([]keyRef, len(cs))
	skip := sharedPrefix(cs)
	for i, c := range cs {
		hi, lo := prefixWords(c.Key[skip:])
		refs[i] = keyRef{hi, lo, int32(i)}
	}
	slices.SortFunc(refs, func(a, b keyRef) int {
		if a.hi != b.hi {
			return cmp.Compare(a.hi, b.hi)
		}
		if a.lo != b.lo {
			return cmp.Compare(a.lo, b.lo)
		}
		if c := strings.Compare(cs[a.i].Key, cs[b.i].Key); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i) // a key's changes in their order
	})
	out := make([]laneChange, len(cs))
	for j, r := range refs {
		out[j] = cs[r.i]
	}
	return out
}

// sharedPrefix returns how many leading bytes every key of cs shares.
func sharedPrefix(cs []laneChange) int {
	first := cs[0].Key
	n := len(first)
	for _, c := range cs[1:] {
		k := c.Key
		if len(k) >= n && k[:n] == first[:n] {
			continue // one vectorized comparison for most keys
		}
		n = min(n, len(k))
		for i := 0; i < n; i++ {
			if k[i] != first[i] {
				n = i
				break
			}
		}
		if n == 0 {
			break
		}
	}
	return n
}

// prefixWords returns key's first 16 bytes, zero-padded, as two big-endian
// words: comparing them orders keys as strings.Compare does, except that
// keys equal in them (a shorter key padded with zeros, or a shared
// 16-byte prefix) need the full comparison.
func prefixWords(key string) (hi, lo uint64) {
	var b [16]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// keyRef is a change's place in its part and the 16 bytes of its key
// sortDistinct sorts by first.
type keyRef struct {
	hi, lo uint64
	i      int32
}
