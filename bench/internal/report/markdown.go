package report

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WriteMarkdown writes the report for people: the machine and the command
// that reproduces the run, then one table per section.
func WriteMarkdown(w io.Writer, r *Report) error {
	b := bufio.NewWriter(w)
	m := r.Machine
	fmt.Fprintf(b, "# counterbench results\n\n")
	fmt.Fprintf(b, "Measured %s, in %s. Reproduce with:\n\n```sh\n%s\n```\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Elapsed.Round(time.Second), r.Command)
	fmt.Fprintf(b, "counterd's and redis-server's logs: %s, %s, %s", CounterdLogFile, RedisLogFile, RedisAOFLogFile)
	if len(section(r.Rows, Uniques)) > 0 {
		fmt.Fprintf(b, ", %s", UniquesLogFile)
	}
	if len(section(r.Rows, Partitions)) > 0 {
		fmt.Fprintf(b, ", %s", PartitionsLogFile)
	}
	if len(section(r.Rows, Fleet)) > 0 {
		fmt.Fprintf(b, ", %s", FleetLogFile)
	}
	if slices.ContainsFunc(r.Rows, func(x Row) bool { return x.Approach == Peer }) {
		fmt.Fprintf(b, ", %s", PeerWorkerLogFile)
	}
	fmt.Fprintf(b, "\n\n")
	table(b, []string{"machine", ""}, [][]string{
		{"CPU", m.CPU},
		{"cores", strconv.Itoa(m.Cores)},
		{"memory", m.Memory},
		{"OS", m.OS},
		{"PostgreSQL", m.PostgreSQL},
		{"Redis", m.Redis},
		{"Go", m.Go},
	})
	if len(r.Settings) > 0 {
		rows := make([][]string, len(r.Settings))
		for i, s := range r.Settings {
			rows[i] = []string{s[0], s[1]}
		}
		table(b, []string{"setting", ""}, rows)
	}
	matrix(b, r)
	ceiling(b, r)
	ingest(b, r)
	paced(b, r)
	sustain(b, r)
	windows(b, r)
	uniques(b, r)
	partitions(b, r)
	fleet(b, r)
	setsMarkdown(b, r)
	budgetMarkdown(b, &r.BudgetPart)
	return b.Flush()
}

func matrix(b *bufio.Writer, r *Report) {
	rows := section(r.Rows, Matrix)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Increments per second\n\n")
	fmt.Fprintf(b, "Each cell runs every client in a closed loop (send one increment, or one pipeline, and wait for the reply) for the same duration. These tables count increments acknowledged per second of load. counterd acknowledges an increment before PostgreSQL has it, so its cells end with a FLUSH, timed as the *drain*, and its *committed* rate is the increments stored divided by load plus drain: the rate at which increments reach the database. The approaches:\n\n")
	for _, a := range r.Approaches {
		fmt.Fprintf(b, "- **%s**: %s\n", a.Name, a.Summary)
	}
	fmt.Fprintln(b)
	for _, d := range r.Dists {
		fmt.Fprintf(b, "### %s: %s\n\n", d.Name, d.Summary)
		head := []string{"approach"}
		for _, c := range r.Clients {
			head = append(head, "c="+strconv.Itoa(c))
		}
		var body [][]string
		for _, a := range r.Approaches {
			line := []string{a.Name}
			for _, c := range r.Clients {
				line = append(line, rateCell(find(rows, a.Name, d.Name, c)))
			}
			body = append(body, line)
		}
		table(b, head, body)
		committed(b, r, rows, d)
	}
	fmt.Fprintf(b, "![increments per second against clients](%s)\n\n", ChartFile)

	fmt.Fprintf(b, "### Every cell\n\n")
	fmt.Fprintf(b, "*total* compares what the store holds afterwards with the increments it acknowledged; *rows/incr* is database rows written per increment (counted by the client for the SQL approaches, from counterd's metrics for counterd); *drain* is counterd's final FLUSH and *committed/s* the increments stored per second of load plus drain.\n\n")
	var body [][]string
	for _, x := range rows {
		if x.Missing {
			body = append(body, []string{x.Approach, x.Keys, strconv.Itoa(x.Clients), "—", "—", "—", "missing: " + x.Note, "—", "—", "—", "—"})
			continue
		}
		body = append(body, []string{
			x.Approach, x.Keys, strconv.Itoa(x.Clients), Thousands(int64(x.Rate)),
			Duration(x.P50), Duration(x.P99), totalCell(x), rowsCell(x), Thousands(x.Errors),
			drainCell(x), committedCell(&x),
		})
	}
	table(b, []string{"approach", "keys", "clients", "incr/s", "p50", "p99", "total", "rows/incr", "errors", "drain", "committed/s"}, body)
}

func ceiling(b *bufio.Writer, r *Report) {
	rows := section(r.Rows, Ceiling)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Ceiling: PostgreSQL's multi-row upsert\n\n")
	fmt.Fprintf(b, "The most rows per second this PostgreSQL upserts when nothing else is in the way: each statement writes a batch of distinct keys with `INSERT ... SELECT * FROM unnest($1::text[], $2::bigint[]) ON CONFLICT (key) DO UPDATE`, repeated draws of a key adding into one delta; two connections write disjoint keys. Any batching writer, counterd included, writes at most this many rows per second.\n\n")
	var body [][]string
	for _, x := range rows {
		if x.Missing {
			body = append(body, []string{x.Keys, strconv.Itoa(x.Clients), "—", "—", "—", "—", "—", "missing: " + x.Note})
			continue
		}
		body = append(body, []string{
			x.Keys, strconv.Itoa(x.Clients), Thousands(int64(x.Pipeline)), Thousands(int64(x.RowRate())),
			Thousands(int64(x.Rate)), Duration(x.P50), Duration(x.P99), totalCell(x),
		})
	}
	table(b, []string{"keys", "connections", "keys/statement", "rows/s", "incr/s", "p50/statement", "p99/statement", "total"}, body)
}

func paced(b *bufio.Writer, r *Report) {
	rows := section(r.Rows, Latency)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Latency at an offered rate\n\n")
	fmt.Fprintf(b, "Unpipelined clients each sending on a fixed schedule. Latency is measured from when a command was due, so a server that falls behind is charged its queueing; a client may send up to 1 ms early (Go timers wake that late), and then only the round trip counts. An achieved rate below the offered one means the server could not keep up.\n\n")
	var body [][]string
	for _, x := range rows {
		if x.Missing {
			body = append(body, []string{serverLabel(x.Approach), strconv.Itoa(x.Clients), "—", "—", "—", "—", "—", "—", "missing: " + x.Note})
			continue
		}
		body = append(body, []string{
			serverLabel(x.Approach), strconv.Itoa(x.Clients), Thousands(int64(x.Offered)), Thousands(int64(x.Rate)),
			Duration(x.P50), Duration(x.P99), Duration(x.P999), Duration(x.Max), totalCell(x),
		})
	}
	table(b, []string{"server", "clients", "offered/s", "achieved/s", "p50", "p99", "p99.9", "max", "total"}, body)
	latencyAgainstEverysec(b, rows)
	latencySeconds(b, rows)
	latencyTarget(b, rows)
}

// committed writes, under a distribution's table, the committed rate of
// every approach that drains, and that rate divided by the baseline's.
func committed(b *bufio.Writer, r *Report, rows []Row, d Dist) {
	var names []string
	for _, a := range r.Approaches {
		for _, c := range r.Clients {
			if x := find(rows, a.Name, d.Name, c); x != nil && x.Drain > 0 {
				names = append(names, a.Name)
				break
			}
		}
	}
	if len(names) == 0 {
		return
	}
	head := []string{"approach"}
	for _, c := range r.Clients {
		head = append(head, "c="+strconv.Itoa(c))
	}
	var body [][]string
	for _, n := range names {
		line := []string{n}
		for _, c := range r.Clients {
			line = append(line, committedCell(find(rows, n, d.Name, c)))
		}
		body = append(body, line)
	}
	fmt.Fprintf(b, "counterd, %s: committed increments per second (load + final FLUSH)\n\n", d.Name)
	table(b, head, body)
	if r.Baseline == "" {
		return
	}
	body = nil
	for _, n := range names {
		line := []string{n + " ÷ " + r.Baseline}
		for _, c := range r.Clients {
			cell := "—"
			x, base := find(rows, n, d.Name, c), find(rows, r.Baseline, d.Name, c)
			if x != nil && base != nil && !base.Missing && base.Rate > 0 {
				if v := x.CommittedRate(); v >= 0 {
					cell = times(v / base.Rate)
				}
			}
			line = append(line, cell)
		}
		body = append(body, line)
	}
	fmt.Fprintf(b, "counterd's committed rate divided by %s's increments per second (%s commits each increment before acknowledging it), %s:\n\n", r.Baseline, r.Baseline, d.Name)
	table(b, append([]string{"ratio"}, head[1:]...), body)
}

func section(rows []Row, name string) []Row {
	var out []Row
	for _, r := range rows {
		if r.Section == name {
			out = append(out, r)
		}
	}
	return out
}

func find(rows []Row, approach, keys string, clients int) *Row {
	for i := range rows {
		if rows[i].Approach == approach && rows[i].Keys == keys && rows[i].Clients == clients {
			return &rows[i]
		}
	}
	return nil
}

func rateCell(r *Row) string {
	switch {
	case r == nil:
		return ""
	case r.Missing:
		return "missing"
	case r.Checked && !r.Exact() && !r.Estimate:
		return Thousands(int64(r.Rate)) + " (inexact)"
	}
	return Thousands(int64(r.Rate))
}

func committedCell(r *Row) string {
	if r == nil || r.Missing {
		return "—"
	}
	if v := r.CommittedRate(); v >= 0 {
		return Thousands(int64(v))
	}
	return "—"
}

func drainCell(r Row) string {
	if r.Drain <= 0 {
		return "—"
	}
	return Duration(r.Drain)
}

// times formats a quotient: two significant digits below 10, whole
// numbers above.
func times(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0f×", v)
	}
	return fmt.Sprintf("%.2g×", v)
}

func totalCell(r Row) string {
	switch {
	case !r.Checked:
		return "not checked"
	case r.Estimate:
		sign := "+"
		if r.Diff() < 0 {
			sign = ""
		}
		return fmt.Sprintf("estimate %s%s (%s; ±%s at 95%%)", sign, Thousands(r.Diff()), percent(r.Diff(), r.Increments), Thousands(r.Bound95))
	case r.Exact():
		return "exact"
	case r.Diff() < 0:
		return fmt.Sprintf("lost %s (%s)", Thousands(-r.Diff()), percent(-r.Diff(), r.Increments))
	default:
		return fmt.Sprintf("%s too many", Thousands(r.Diff()))
	}
}

func percent(part, whole int64) string {
	if whole == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2g%%", 100*float64(part)/float64(whole))
}

func rowsCell(r Row) string {
	v := r.RowsPerIncrement()
	switch {
	case v < 0:
		return "—"
	case v >= 0.1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

// table writes a Markdown table.
func table(b *bufio.Writer, head []string, rows [][]string) {
	line := func(cells []string) {
		esc := make([]string, len(cells))
		for i, c := range cells {
			esc[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(esc, " | "))
	}
	line(head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range rows {
		line(r)
	}
	fmt.Fprintln(b)
}
