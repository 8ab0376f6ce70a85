package report

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// Sections of a report's budget part.
const (
	// Budget cells are one approach spending one budget at one
	// concurrency (seed 000).
	Budget = "budget"
	// Tickets cells are one approach drawing one owner's tickets at one
	// concurrency (seed 004).
	Tickets = "tickets"
)

// BudgetCSVFile holds the budget and tickets cells, one record each.
const BudgetCSVFile = "budgets.csv"

// BudgetRow is one measured budget cell.
type BudgetRow struct {
	Approach string
	// Budget is the units the budget started with.
	Budget  int64
	Clients int
	Elapsed time.Duration
	// Grants counts units granted (acknowledged to a client), Errors the
	// takes that failed.
	Grants, Errors int64
	// Rate is grants per second; P50 and P99 the latency of one grant.
	Rate     float64
	P50, P99 time.Duration
	// Exhausted says every client was refused before the time was up.
	Exhausted bool
	// Remaining is what the store offered afterwards (for counterd, once
	// the daemons returned their leases); negative for an overspent row.
	Remaining int64
	// Overspend counts grants beyond the budget; Underspend units
	// neither granted nor remaining.
	Overspend, Underspend int64
	// Missing says the cell could not run, and Note why; Note may also
	// carry a remark on a cell that ran.
	Missing bool
	Note    string
}

// TicketRow is one measured tickets cell.
type TicketRow struct {
	Approach string
	// Tickets is how many the owner had.
	Tickets int64
	Clients int
	Elapsed time.Duration
	// Draws counts tickets drawn; Retries extra attempts; Failures draws
	// that got nothing while tickets remained; Duplicates tickets handed
	// out twice; Errors draws that failed with an error.
	Draws, Retries, Failures, Duplicates, Errors int64
	// Left is the owner's undrawn tickets afterwards.
	Left int64
	// Rate is draws per second; P50 and P99 the latency of one draw.
	Rate     float64
	P50, P99 time.Duration
	Missing  bool
	Note     string
}

// BudgetPart is the budget and tickets sections' part of a report.
type BudgetPart struct {
	Budgets          []BudgetRow
	Tickets          []TicketRow
	BudgetApproaches []Approach
	TicketApproaches []Approach
	// Baseline names the approach counterd's rate is divided by, at the
	// most clients measured; Targets names the approaches divided.
	Baseline string
	Targets  []string
	// Target is the ratio the issue asks for.
	Target float64
}

func (p *BudgetPart) empty() bool { return len(p.Budgets) == 0 && len(p.Tickets) == 0 }

func budgetMarkdown(b *bufio.Writer, p *BudgetPart) {
	if len(p.Budgets) > 0 {
		budgetTables(b, p)
	}
	if len(p.Tickets) > 0 {
		ticketTables(b, p)
	}
}

func budgetTables(b *bufio.Writer, p *BudgetPart) {
	fmt.Fprintf(b, "## Budgets: grants per second (seed 000)\n\n")
	fmt.Fprintf(b, "Each client takes one unit at a time in a closed loop, on its own connection, until it is refused (the budget is spent) or the cell's time is up, whichever comes first; a budget that outlasts the time measures the steady state. *overspend* counts grants beyond the budget; *under-spend* counts units neither granted nor left to grant afterwards (for counterd, read from `budget_totals` after SIGTERM, once the daemons returned their leases). The approaches:\n\n")
	for _, a := range p.BudgetApproaches {
		fmt.Fprintf(b, "- **%s**: %s\n", a.Name, a.Summary)
	}
	fmt.Fprintln(b)
	var sizes []int64
	var clients []int
	for _, x := range p.Budgets {
		if !slices.Contains(sizes, x.Budget) {
			sizes = append(sizes, x.Budget)
		}
		if !slices.Contains(clients, x.Clients) {
			clients = append(clients, x.Clients)
		}
	}
	slices.Sort(clients)
	for _, size := range sizes {
		fmt.Fprintf(b, "### Budget of %s: grants per second\n\n", Thousands(size))
		head := []string{"approach"}
		for _, c := range clients {
			head = append(head, "c="+strconv.Itoa(c))
		}
		var body [][]string
		for _, a := range p.BudgetApproaches {
			line := []string{a.Name}
			for _, c := range clients {
				line = append(line, budgetRateCell(findBudget(p.Budgets, a.Name, size, c)))
			}
			body = append(body, line)
		}
		table(b, head, body)
		budgetRatio(b, p, size, clients[len(clients)-1])
	}
	fmt.Fprintf(b, "### Every budget cell\n\n")
	var body [][]string
	for _, x := range p.Budgets {
		if x.Missing {
			body = append(body, []string{x.Approach, Thousands(x.Budget), strconv.Itoa(x.Clients), "—", "—", "—", "—", "—", "—", "—", "—", "—", "missing: " + x.Note})
			continue
		}
		ended := "time"
		if x.Exhausted {
			ended = "spent"
		}
		body = append(body, []string{
			x.Approach, Thousands(x.Budget), strconv.Itoa(x.Clients), Thousands(int64(x.Rate)), Duration(x.P50), Duration(x.P99),
			Thousands(x.Grants), ended, Thousands(x.Remaining), Thousands(x.Overspend), Thousands(x.Underspend), Thousands(x.Errors), x.Note,
		})
	}
	table(b, []string{"approach", "budget", "clients", "grants/s", "p50", "p99", "grants", "ended", "remaining", "overspend", "under-spend", "errors", "note"}, body)
}

// budgetRatio writes each target approach's rate divided by the
// baseline's at c clients, against the target.
func budgetRatio(b *bufio.Writer, p *BudgetPart, size int64, c int) {
	base := findBudget(p.Budgets, p.Baseline, size, c)
	if p.Baseline == "" || base == nil {
		return
	}
	var body [][]string
	for _, name := range p.Targets {
		x := findBudget(p.Budgets, name, size, c)
		if x == nil {
			continue
		}
		ratio, verdict := "—", "not measured"
		switch {
		case x.Missing:
			verdict = "not measured (see the cell's note)"
		case base.Missing || base.Rate <= 0:
			verdict = "no baseline"
		default:
			v := x.Rate / base.Rate
			ratio = times(v)
			verdict = "not met"
			if v >= p.Target && x.Overspend == 0 {
				verdict = "met"
			}
			if x.Overspend != 0 {
				verdict += fmt.Sprintf(" (overspent %s)", Thousands(x.Overspend))
			}
		}
		body = append(body, []string{name + " ÷ " + p.Baseline, ratio, verdict})
	}
	if len(body) == 0 {
		return
	}
	fmt.Fprintf(b, "Grants per second at %d clients divided by %s's; target ≥ %s with no overspend:\n\n", c, p.Baseline, times(p.Target))
	table(b, []string{"ratio", "c=" + strconv.Itoa(c), "target"}, body)
}

func ticketTables(b *bufio.Writer, p *BudgetPart) {
	fmt.Fprintf(b, "## Tickets: one owner's tickets drawn concurrently (seed 004)\n\n")
	fmt.Fprintf(b, "Clients draw one owner's tickets concurrently, each in a closed loop, never more draws under way than tickets left, until every ticket is drawn or the cell's time is up. A *failure* is a draw that got nothing (or gave up) while the owner still had tickets; its client draws again. *retries* are extra attempts inside a draw; *twice* counts tickets handed out more than once (checked against every id drawn and the table). The approaches:\n\n")
	for _, a := range p.TicketApproaches {
		fmt.Fprintf(b, "- **%s**: %s\n", a.Name, a.Summary)
	}
	fmt.Fprintln(b)
	var clients []int
	for _, x := range p.Tickets {
		if !slices.Contains(clients, x.Clients) {
			clients = append(clients, x.Clients)
		}
	}
	slices.Sort(clients)
	head := []string{"approach"}
	for _, c := range clients {
		head = append(head, "c="+strconv.Itoa(c))
	}
	var body [][]string
	for _, a := range p.TicketApproaches {
		line := []string{a.Name}
		for _, c := range clients {
			cell := ""
			if x := findTicket(p.Tickets, a.Name, c); x != nil {
				cell = "missing"
				if !x.Missing {
					cell = fmt.Sprintf("%s (%s retries, %s failures)", Thousands(int64(x.Rate)), Thousands(x.Retries), Thousands(x.Failures))
				}
			}
			line = append(line, cell)
		}
		body = append(body, line)
	}
	fmt.Fprintf(b, "Draws per second (retries, failures):\n\n")
	table(b, head, body)
	body = nil
	for _, x := range p.Tickets {
		if x.Missing {
			body = append(body, []string{x.Approach, Thousands(x.Tickets), strconv.Itoa(x.Clients), "—", "—", "—", "—", "—", "—", "—", "—", "—", "missing: " + x.Note})
			continue
		}
		body = append(body, []string{
			x.Approach, Thousands(x.Tickets), strconv.Itoa(x.Clients), Thousands(int64(x.Rate)), Duration(x.P50), Duration(x.P99),
			Thousands(x.Draws), Thousands(x.Retries), Thousands(x.Failures), Thousands(x.Duplicates), Thousands(x.Errors), Thousands(x.Left), x.Note,
		})
	}
	fmt.Fprintf(b, "### Every tickets cell\n\n")
	table(b, []string{"approach", "tickets", "clients", "draws/s", "p50", "p99", "draws", "retries", "failures", "twice", "errors", "left", "note"}, body)
}

func findBudget(rows []BudgetRow, approach string, size int64, clients int) *BudgetRow {
	for i := range rows {
		if rows[i].Approach == approach && rows[i].Budget == size && rows[i].Clients == clients {
			return &rows[i]
		}
	}
	return nil
}

func findTicket(rows []TicketRow, approach string, clients int) *TicketRow {
	for i := range rows {
		if rows[i].Approach == approach && rows[i].Clients == clients {
			return &rows[i]
		}
	}
	return nil
}

func budgetRateCell(x *BudgetRow) string {
	switch {
	case x == nil:
		return ""
	case x.Missing:
		return "missing"
	case x.Overspend > 0:
		return fmt.Sprintf("%s (overspent %s)", Thousands(int64(x.Rate)), Thousands(x.Overspend))
	case x.Underspend > 0:
		return fmt.Sprintf("%s (under-spent %s)", Thousands(int64(x.Rate)), Thousands(x.Underspend))
	}
	return Thousands(int64(x.Rate))
}

// BudgetColumns are budgets.csv's header. Latencies are in microseconds;
// size is the budget or the tickets the owner had; ops are grants or
// draws.
var BudgetColumns = []string{
	"section", "approach", "size", "clients", "seconds", "ops", "ops_per_s", "p50_us", "p99_us",
	"exhausted", "remaining", "overspend", "underspend", "retries", "failures", "duplicates", "errors",
	"missing", "note",
}

// WriteBudgetCSV writes the header and one record per budget and tickets
// cell.
func WriteBudgetCSV(w io.Writer, p *BudgetPart) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(BudgetColumns); err != nil {
		return err
	}
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	f := func(x float64, prec int) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	us := func(d time.Duration) string { return f(float64(d)/1e3, 1) }
	write := func(v map[string]string) error {
		rec := make([]string, len(BudgetColumns))
		for n, c := range BudgetColumns {
			rec[n] = v[c]
		}
		return cw.Write(rec)
	}
	for _, x := range p.Budgets {
		v := map[string]string{"section": Budget, "approach": x.Approach, "size": i(x.Budget), "clients": strconv.Itoa(x.Clients),
			"missing": strconv.FormatBool(x.Missing), "note": x.Note}
		if !x.Missing {
			v["seconds"], v["ops"], v["ops_per_s"] = f(x.Elapsed.Seconds(), 3), i(x.Grants), f(x.Rate, 1)
			v["p50_us"], v["p99_us"], v["exhausted"] = us(x.P50), us(x.P99), strconv.FormatBool(x.Exhausted)
			v["remaining"], v["overspend"], v["underspend"], v["errors"] = i(x.Remaining), i(x.Overspend), i(x.Underspend), i(x.Errors)
		}
		if err := write(v); err != nil {
			return err
		}
	}
	for _, x := range p.Tickets {
		v := map[string]string{"section": Tickets, "approach": x.Approach, "size": i(x.Tickets), "clients": strconv.Itoa(x.Clients),
			"missing": strconv.FormatBool(x.Missing), "note": x.Note}
		if !x.Missing {
			v["seconds"], v["ops"], v["ops_per_s"] = f(x.Elapsed.Seconds(), 3), i(x.Draws), f(x.Rate, 1)
			v["p50_us"], v["p99_us"], v["exhausted"] = us(x.P50), us(x.P99), strconv.FormatBool(x.Left == 0)
			v["remaining"], v["retries"], v["failures"] = i(x.Left), i(x.Retries), i(x.Failures)
			v["duplicates"], v["errors"] = i(x.Duplicates), i(x.Errors)
		}
		if err := write(v); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
