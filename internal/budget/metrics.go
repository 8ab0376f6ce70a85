package budget

import (
	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/exposition"
)

type managerMetrics struct {
	leases, leasedUnits, returnedUnits *metrics.Counter
	grants, direct, refused, ranges    *metrics.Counter
	unreturned                         *metrics.Counter
}

func newManagerMetrics(set *metrics.Set) managerMetrics {
	return managerMetrics{
		leases:        exposition.Counter(set, `counterd_budget_leases_total`, "Budget leases taken from PostgreSQL."),
		leasedUnits:   exposition.Counter(set, `counterd_budget_leased_units_total`, "Budget units leased from PostgreSQL."),
		returnedUnits: exposition.Counter(set, `counterd_budget_returned_units_total`, "Unused lease units given back: idle, expired, at stop and start."),
		grants:        exposition.Counter(set, `counterd_budget_grants_total`, "TAKEs granted from a lease in memory."),
		direct: exposition.Counter(set, `counterd_budget_direct_takes_total`,
			"TAKEs sent to PostgreSQL as a conditional update: near zero, before leases are recovered, or without a journal."),
		refused: exposition.Counter(set, `counterd_budget_refused_takes_total`, "TAKEs answered 0."),
		ranges:  exposition.Counter(set, `counterd_budget_next_ranges_total`, "NEXT ranges leased."),
		unreturned: exposition.Counter(set, `counterd_budget_unreturned_takes_total`,
			"TAKEs answered TRYAGAIN: the remainder could not cover them while leases of an earlier run were not returned yet."),
	}
}
