package slots

import (
	"encoding/binary"
	"slices"
	"strings"
)

// sortByKey sorts cs by key, as write needs (every writer locks rows in
// key order), keeping a key's changes in their order. Counters' keys
// hardly repeat within a part: they are radix-sorted and gathered
// (sortDistinct; a comparison sort of the changes in place took 15-50 ms
// of a 49,000-key round at 50,000 INCR/s in an instrumented build, while
// the event loop waited for a core). A part of unique members holds many changes a key (one a
// distinct member), where comparing keys in a general sort cost more than
// the rest of writing them; so when a sample of the changes repeats keys
// it sorts the distinct keys and places each change by its key's rank.
// The order of keys is strings.Compare's either way.
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
// It radix-sorts references by each key's first 16 bytes (prefixWords),
// least significant byte first and skipping bytes every key shares ("post:"),
// which is stable and needs no comparisons; only runs of references equal
// in those 16 bytes (keys longer than 16 bytes sharing them) are then
// compared as strings. A comparison sort of the changes took 17 ms of a
// 49,000-key round (BenchmarkSortByKey), its compares missing the cache
// on both keys.
func sortDistinct(cs []laneChange) []laneChange {
	refs, tmp := make([]keyRef, len(cs)), make([]keyRef, len(cs))
	for i, c := range cs {
		hi, lo := prefixWords(c.Key)
		refs[i] = keyRef{hi, lo, int32(i)}
	}
	var count [256]int
	for pass := range 16 {
		shift := uint(8 * (pass % 8))
		word := func(r keyRef) uint64 { return r.lo }
		if pass >= 8 {
			word = func(r keyRef) uint64 { return r.hi }
		}
		clear(count[:])
		for _, r := range refs {
			count[byte(word(r)>>shift)]++
		}
		if count[byte(word(refs[0])>>shift)] == len(refs) {
			continue // every key has the same byte here
		}
		pos := 0
		for b, n := range count {
			count[b] = pos
			pos += n
		}
		for _, r := range refs {
			d := byte(word(r) >> shift)
			tmp[count[d]] = r
			count[d]++
		}
		refs, tmp = tmp, refs
	}
	for lo := 0; lo < len(refs); {
		hi := lo + 1
		for hi < len(refs) && refs[hi].hi == refs[lo].hi && refs[hi].lo == refs[lo].lo {
			hi++
		}
		if hi-lo > 1 {
			slices.SortStableFunc(refs[lo:hi], func(a, b keyRef) int { return strings.Compare(cs[a.i].Key, cs[b.i].Key) })
		}
		lo = hi
	}
	out := make([]laneChange, len(cs))
	for j, r := range refs {
		out[j] = cs[r.i]
	}
	return out
}

// keyRef is a change's place in its part and its key's first 16 bytes.
type keyRef struct {
	hi, lo uint64
	i      int32
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
