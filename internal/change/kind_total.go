package change

// Total is the all-time total of a key: INCR, INCRBY, DECR and their
// sampled forms add to it, GET reads it. It is the plain kind.
const Total Kind = 1

func totalSpec() Spec {
	return Spec{Name: "total", Plain: true, InBucket: totalInBucket}
}

// totalInBucket is an increment's change to its key's bucket: the same
// delta and variance, in the count of the window kind's bucket.
func totalInBucket(ch Change, w Kind, start int64) Change {
	return Change{Key: ch.Key, Kind: w, Bucket: start, Delta: ch.Delta, Var: ch.Var}
}
