package report

import (
	"bufio"
	"fmt"
	"strconv"
)

// windows writes the time-windows cells side by side: increments per
// second and slot rows written per increment without windows and with
// three.
func windows(b *bufio.Writer, r *Report) {
	rows := section(r.Rows, Windows)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Time windows\n\n")
	fmt.Fprintf(b, "The same load against counterd without time windows (*counterd*) and with three (*counterd+3 windows*): `COUNTERD_WINDOWS='*=minute:2h,hour:14d,day:400d'`, each increment adding to its key's total and to three buckets; each its own daemon, then FLUSHed. *rows/incr* counts slot rows written (totals and buckets, `counterd_flush_keys_total`) per increment.\n\n")
	var body [][]string
	var base float64
	for _, x := range rows {
		if x.Missing {
			body = append(body, []string{x.Approach, x.Keys, strconv.Itoa(x.Clients), "—", "—", "—", "—", "missing: " + x.Note})
			continue
		}
		ratio := "1.00"
		if base == 0 {
			base = x.Rate
		} else if base > 0 {
			ratio = fmt.Sprintf("%.2f", x.Rate/base)
		}
		body = append(body, []string{
			x.Approach, x.Keys, strconv.Itoa(x.Clients), Thousands(int64(x.Rate)), ratio, rowsCell(x), Duration(x.P99), totalCell(x),
		})
	}
	table(b, []string{"counterd", "keys", "clients", "incr/s", "vs none", "rows/incr", "p99", "total"}, body)
}
