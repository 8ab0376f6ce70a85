package slots

import (
	"slices"
	"strings"
)

// sortByKey sorts cs by key, as write needs (every writer locks rows in
// key order). A part of unique members holds many changes a key (one a
// distinct member), where comparing keys in a general sort cost more than
// the rest of writing them; so when keys repeat it sorts the distinct
// keys and places each change by its key's rank (stable: a key's changes
// keep their order). The order of keys is strings.Compare's either way.
func sortByKey(cs []laneChange) []laneChange {
	cmpKey := func(a, b laneChange) int { return strings.Compare(a.Key, b.Key) }
	if len(cs) < 64 {
		slices.SortFunc(cs, cmpKey)
		return cs
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
		// Keys mostly distinct: the general sort is cheaper.
		slices.SortFunc(cs, cmpKey)
		return cs
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
