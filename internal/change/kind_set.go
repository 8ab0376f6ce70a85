package change

// Set replaces a key's total: Delta is the value the total becomes (DEL
// is a Set to 0). It lands on the Total cell of its key and is ordered
// with increments: those accepted before it are replaced, those after it
// add to the new value (the cell is then written as a Set of the sum). It
// removes the key's expiry, as in Redis: one accepted before it in the
// same round is cancelled, and a read stops seeing the stored one.
const Set Kind = 5

func setSpec() Spec {
	return Spec{
		Name:    "set",
		Lands:   Total,
		Merge:   ReplaceNet,
		Cancels: []Kind{Expire},
		Read: func(r *Reading, n Net) {
			*r = Reading{N: n.N, V: n.V}
		},
	}
}
