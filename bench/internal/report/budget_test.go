package report_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/report"
)

func budgetSample() *report.Report {
	// Clients as a run gives them: the chart needs one.
	r := &report.Report{Command: "COUNTERBENCH_SECTIONS=budget,tickets make bench", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Clients: []int{1}}
	r.BudgetPart = report.BudgetPart{
		BudgetApproaches: []report.Approach{{"naive", "read then write"}, {"lock-free", "conditional update"}, {"counterd", "TAKE"}, {"counterd-2", "TAKE, two daemons"}},
		TicketApproaches: []report.Approach{{"skip-locked", "one statement"}, {"redis-list", "LPOP"}},
		Baseline:         "lock-free", Targets: []string{"counterd", "counterd-2"}, Target: 100,
	}
	for _, c := range []int{3, 32} {
		r.Budgets = append(r.Budgets,
			report.BudgetRow{Approach: "naive", Budget: 10000, Clients: c, Elapsed: time.Second, Grants: 10031, Rate: 1500, Exhausted: true, Remaining: -31, Overspend: 31},
			report.BudgetRow{Approach: "lock-free", Budget: 10000, Clients: c, Elapsed: time.Second, Grants: 2000, Rate: 2000, Remaining: 8000},
			report.BudgetRow{Approach: "counterd", Budget: 10000, Clients: c, Elapsed: time.Second, Grants: 10000, Rate: 250000, Exhausted: true},
			report.BudgetRow{Approach: "counterd-2", Budget: 10000, Clients: c, Elapsed: time.Second, Grants: 9000, Rate: 150000, Remaining: 998, Underspend: 2},
		)
	}
	r.Tickets = []report.TicketRow{
		{Approach: "skip-locked", Tickets: 1000, Clients: 8, Elapsed: time.Second, Draws: 1000, Rate: 1200},
		{Approach: "redis-list", Tickets: 1000, Clients: 8, Missing: true, Note: "redis-server not found"},
	}
	return r
}

func TestBudgetMarkdown(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := report.WriteMarkdown(&buf, budgetSample()); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"## Budgets: grants per second (seed 000)",
		"| naive | 1,500 (overspent 31) | 1,500 (overspent 31) |",
		"| counterd-2 | 150,000 (under-spent 2) |",
		"Grants per second at 32 clients divided by lock-free's; target ≥ 100× with no overspend",
		"| counterd ÷ lock-free | 125× | met |",
		"| counterd-2 ÷ lock-free | 75× | not met |",
		"| naive | 10,000 | 3 | 1,500 | 0 | 0 | 10,031 | spent | -31 | 31 | 0 | 0 |  |",
		"## Tickets: one owner's tickets drawn concurrently (seed 004)",
		"| skip-locked | 1,200 (0 retries, 0 failures) |",
		"| redis-list | 1,000 | 8 | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("bench.md lacks %q:\n%s", want, md)
		}
	}
}

// TestBudgetFiles: budgets.csv comes with budget rows and goes when a
// later run has none.
func TestBudgetFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := budgetSample()
	if err := report.Write(dir, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, report.BudgetCSVFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1+8+2 || lines[0] != strings.Join(report.BudgetColumns, ",") {
		t.Fatalf("budgets.csv has %d lines, header %q; want 11 and the columns", len(lines), lines[0])
	}
	if !strings.HasPrefix(lines[1], "budget,naive,10000,3,1.000,10031,1500.0,") || !strings.HasPrefix(lines[10], "tickets,redis-list,1000,8,,") {
		t.Errorf("budgets.csv rows:\n%s", b)
	}
	if err := report.Write(dir, sample()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, report.BudgetCSVFile)); !os.IsNotExist(err) {
		t.Errorf("budgets.csv left from the earlier run: %v", err)
	}
}
