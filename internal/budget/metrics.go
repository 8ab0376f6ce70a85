package budget

import "github.com/VictoriaMetrics/metrics"

type managerMetrics struct {
	leases, leasedUnits, returnedUnits *metrics.Counter
	grants, direct, refused, ranges    *metrics.Counter
}

func newManagerMetrics(set *metrics.Set) managerMetrics {
	return managerMetrics{
		leases:        set.NewCounter(`counterd_budget_leases_total`),
		leasedUnits:   set.NewCounter(`counterd_budget_leased_units_total`),
		returnedUnits: set.NewCounter(`counterd_budget_returned_units_total`),
		grants:        set.NewCounter(`counterd_budget_grants_total`),
		direct:        set.NewCounter(`counterd_budget_direct_takes_total`),
		refused:       set.NewCounter(`counterd_budget_refused_takes_total`),
		ranges:        set.NewCounter(`counterd_budget_next_ranges_total`),
	}
}
