package report

import (
	"encoding/csv"
	"io"
	"strconv"
)

// Columns are bench.csv's header. Rates are per second, latencies in
// microseconds; a column that does not apply to a row is empty.
var Columns = []string{
	"section", "approach", "keys", "clients", "pipeline", "seconds",
	"increments", "errors", "incr_per_s", "offered_per_s", "p50_us", "p99_us",
	"stored", "exact", "diff", "estimate_bound95",
	"rows_written", "rows_per_incr", "rows_per_s", "missing", "note",
}

// WriteCSV writes the header and one record per row.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Columns); err != nil {
		return err
	}
	for _, r := range rows {
		if err := cw.Write(record(r)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func record(r Row) []string {
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	f := func(x float64, prec int) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	us := func(d int64) string { return f(float64(d)/1e3, 1) }
	rec := []string{
		r.Section, r.Approach, r.Keys, strconv.Itoa(r.Clients), strconv.Itoa(r.Pipeline), "",
		"", "", "", "", "", "",
		"", "", "", "",
		"", "", "", strconv.FormatBool(r.Missing), r.Note,
	}
	if r.Missing {
		return rec
	}
	rec[5] = f(r.Elapsed.Seconds(), 3)
	rec[6], rec[7], rec[8] = i(r.Increments), i(r.Errors), f(r.Rate, 1)
	if r.Offered > 0 {
		rec[9] = f(r.Offered, 1)
	}
	rec[10], rec[11] = us(int64(r.P50)), us(int64(r.P99))
	if r.Checked {
		rec[12], rec[13], rec[14] = i(r.Stored), strconv.FormatBool(r.Exact()), i(r.Diff())
		if r.Estimate {
			rec[15] = i(r.Bound95)
		}
	}
	if r.RowsWritten >= 0 {
		rec[16], rec[17], rec[18] = i(r.RowsWritten), f(r.RowsPerIncrement(), 6), f(r.RowRate(), 1)
	}
	return rec
}
