package change

import "fmt"

// Unique is one member of a key's set of distinct members (PFADD), kept
// in the store as a HyperLogLog sketch (internal/hll).
//
// A cell's net is an int64, and a sketch is not one, so the kind does not
// carry a sketch through the pipeline: a change is one member, and its
// cell is the member. Bucket holds the member's 64-bit hash (hll.Hash,
// MurmurHash3 as PostgreSQL's hll_hash_bytea computes it), so the cell id
// (key, Unique, hash) is what makes repeats of a member collapse: two
// PFADDs of one member in a round are one cell, and the round writes each
// distinct hash once. Delta is 1, the number of times the member was
// added (only its being positive means anything: a sketch ignores
// repeats), so the kind adds up like a count and takes the accumulator's
// shared path, not the exclusive one; nets held by two shards add. This
// is the smallest widening: no field of Change, Net or the journal record
// changes, and the journal's bytes for the other kinds are untouched. The
// price is one cell per distinct member per round in memory and, in the
// journal, the key and about 12 bytes per member, where a sketch would
// bound both by 12 KB per key; a round is short, so it stays small.
const Unique Kind = 8

func uniqueSpec() Spec {
	return Spec{Name: "unique", Check: checkUnique, Members: true, InBucket: uniqueInBucket}
}

// uniqueInBucket is a member's change to its key's bucket: the member,
// added as many times, in the sketch of the window kind's bucket
// (BucketMember).
func uniqueInBucket(ch Change, w Kind, start int64) Change {
	m := BucketMember(ch.Key, w, start, uint64(ch.Bucket))
	m.Delta = ch.Delta
	return m
}

// checkUnique accepts any hash and a positive number of additions.
func checkUnique(c Change) error {
	if c.Delta < 1 || c.Var != 0 {
		return fmt.Errorf("a unique member is added a positive number of times without variance, got %d (variance %g)", c.Delta, c.Var)
	}
	return nil
}

// Member is the change adding the member whose hash is h to key's set.
func Member(key string, h uint64) Change {
	return Change{Key: key, Kind: Unique, Bucket: int64(h), Delta: 1}
}
