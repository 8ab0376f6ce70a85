package store

import "math/big"

// Estimate is a key's stored total with the variance of its sampled part.
type Estimate struct {
	// Total is the stored total when it fits in int64.
	Total int64
	// Wide is the stored total when it does not fit in int64; nil
	// otherwise. Stored counts are exact at any size, so such a total is
	// exact.
	Wide *big.Int
	// Var is the variance of the sampled increments in the total.
	Var float64
	// Expires is when the key expires, in unix milliseconds; 0 for none.
	// A key already expired reads as 0 with Expires 0.
	Expires int64
}

// Snapshot is what one read saw: each key's stored estimate and, for each
// identity asked about, the lanes' watermarks, as of one moment.
type Snapshot struct {
	Estimates []Estimate
	Marks     []Marks
	// KeyMarks, when not nil, holds each key's own Marks, for a store
	// of partitions whose watermarks differ from one partition to the
	// next (a key's rows and its lane's watermark are on one
	// partition); Marks is then not used. MarksOf reads either.
	KeyMarks [][]Marks
}

// MarksOf returns the watermarks that hold for the i-th key read.
func (s *Snapshot) MarksOf(i int) []Marks {
	if s.KeyMarks != nil {
		return s.KeyMarks[i]
	}
	return s.Marks
}

// BucketValue is one bucket's stored count.
type BucketValue struct {
	Start int64 // unix seconds
	Total int64
	Var   float64
}

// BucketSnapshot is what one bucket read saw: a key's stored buckets and
// the lanes' watermarks of the identities asked about, from one snapshot.
type BucketSnapshot struct {
	Buckets []BucketValue // only buckets with rows, in no order
	Marks   []Marks
}

// KeyTotal is a key's count over a range of buckets.
type KeyTotal struct {
	Key   string
	Total int64
}

// TopSnapshot is what one trending read saw.
type TopSnapshot struct {
	// Top is the keys with the largest counts, largest first.
	Top []KeyTotal
	// Keys is the stored count of each key asked about, in order.
	Keys  []int64
	Marks []Marks
	// KeyMarks is as Snapshot's, for each of Keys.
	KeyMarks [][]Marks
}

// MarksOf returns the watermarks that hold for the i-th of Keys.
func (s *TopSnapshot) MarksOf(i int) []Marks {
	if s.KeyMarks != nil {
		return s.KeyMarks[i]
	}
	return s.Marks
}
