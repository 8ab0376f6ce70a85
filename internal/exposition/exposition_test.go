package exposition

import (
	"bytes"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/proctest"
)

func TestAnnotate(t *testing.T) {
	t.Parallel()
	describe("exposition_test_total", "Test counter with a \\ and\na newline.")
	f := func(in, want string) {
		t.Helper()
		var b bytes.Buffer
		if err := annotate(&b, []byte(in)); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); got != want {
			t.Errorf("annotate(%q):\ngot  %q;\nwant %q", in, got, want)
		}
	}
	// A registered family gets its help, escaped.
	f("# HELP exposition_test_total\n# TYPE exposition_test_total counter\nexposition_test_total{a=\"b\"} 1\n",
		"# HELP exposition_test_total Test counter with a \\\\ and\\na newline.\n# TYPE exposition_test_total counter\nexposition_test_total{a=\"b\"} 1\n")
	// A library family gets its help; a wrong type is corrected.
	f("# HELP process_io_read_bytes_total\n# TYPE process_io_read_bytes_total gauge\nprocess_io_read_bytes_total 7\n",
		"# HELP process_io_read_bytes_total Bytes the process read through read-like system calls.\n# TYPE process_io_read_bytes_total counter\nprocess_io_read_bytes_total 7\n")
	// A name promtool refuses is renamed on every line.
	f("# HELP go_cgo_calls_count\n# TYPE go_cgo_calls_count counter\ngo_cgo_calls_count 1\n",
		"# HELP go_cgo_calls_total Calls from Go to C since the process started.\n# TYPE go_cgo_calls_total counter\ngo_cgo_calls_total 1\n")
	// A family nobody described keeps its bare line, for promtool to
	// report; a help text already there is kept.
	f("# HELP nobody_total\n# TYPE nobody_total counter\nnobody_total 0\n",
		"# HELP nobody_total\n# TYPE nobody_total counter\nnobody_total 0\n")
	f("# HELP x_total Own text.\nx_total 0\n", "# HELP x_total Own text.\nx_total 0\n")
}

func TestDescribeRefusesTwoHelpTexts(t *testing.T) {
	t.Parallel()
	describe(`exposition_twice_total{a="1"}`, "One text.")
	describe(`exposition_twice_total{a="2"}`, "One text.") // same family, same text: fine
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "two help texts") {
			t.Fatalf("recover: got %v; want a BUG panic naming two help texts", r)
		}
	}()
	describe("exposition_twice_total", "Another text.")
}

// Every metric kind written by Write, with the Go runtime and process
// metrics, passes promtool with no finding.
func TestWritePassesPromtool(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	Counter(set, `exposition_promtool_total{kind="a"}`, "Test counter.").Inc()
	Gauge(set, "exposition_promtool_items", "Test gauge.", func() float64 { return 3 })
	Histogram(set, "exposition_promtool_seconds", "Test histogram.", nil).Update(0.2)
	Histogram(set, "exposition_promtool_keys", "Test histogram with buckets.", metrics.ExponentialBuckets(1, 4, 4)).Update(5)
	var b bytes.Buffer
	if err := Write(&b, []*metrics.Set{set}); err != nil {
		t.Fatal(err)
	}
	if missing := proctest.MissingHelp(b.String()); len(missing) > 0 {
		t.Errorf("families without help text: %v", missing)
	}
	proctest.CheckMetrics(t, b.String())
}
