package slots

import (
	"context"

	"github.com/counterd/counterd/internal/change"
)

// Budget grants (change.Grant) are recorded against their leases
// (grant.go) in the round's transaction, after its lanes moved, so a
// lane's grants commit with its watermark: exactly once.
//
// GrantWriter is the Writer of budget grants (change.Grant), one of a
// store's Options.Kinds.
func GrantWriter() Writer {
	return Writer{
		Name:  "budget grants",
		Kinds: []change.Kind{change.Grant},
		Order: 2,
		Exec: func(ctx context.Context, r *Round, cs []change.Change) error {
			g := &grantBatch{}
			for _, c := range cs {
				g.leases = append(g.leases, c.Bucket)
				g.units = append(g.units, c.Delta)
				g.lanes = append(g.lanes, 1)
			}
			// Every change given is of a lane this transaction moved: no
			// lanes for writeGrants to check.
			return recordGrants(ctx, r.Tx, nil, g)
		},
	}
}
