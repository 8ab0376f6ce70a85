package budget

// Helpers of package budget's tests, for its external tests.
var (
	CheckInvariant = checkInvariant
	ReadTotals     = totals
)
