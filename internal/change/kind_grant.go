package change

import "fmt"

// Grant records units granted by TAKE from a leased share of a budget
// (internal/budget): Key is the budget, Bucket the lease's id in
// budget_leases, Delta the units granted. It is a separate keyspace from
// the counters: a round writes it against the lease, never into a
// counter, and no read takes it in.
const Grant Kind = 7

func grantSpec() Spec {
	return Spec{Name: "grant", Check: func(c Change) error {
		if c.Bucket <= 0 {
			return fmt.Errorf("grant needs a lease id, got bucket %d", c.Bucket)
		}
		return nil
	}}
}
