package change

// Expire sets when a key's total expires: Delta is the unix second, or 0
// to remove an expiry (PERSIST). Its cell holds the last one accepted,
// and a read of the key's total takes it in.
const Expire Kind = 6

func expireSpec() Spec {
	return Spec{
		Name:   "expire",
		Merge:  ReplaceNet,
		ReadBy: Total,
		Read: func(r *Reading, n Net) {
			r.Expires = n.N * 1000
		},
	}
}
