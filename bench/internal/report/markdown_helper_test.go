package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/counterd/counterd/bench/internal/report"
)

// markdownHas writes r's bench.md, checks that it holds every line of
// want, and returns it; on a miss it logs the whole page.
func markdownHas(t *testing.T, r *report.Report, want ...string) string {
	t.Helper()
	var md bytes.Buffer
	if err := report.WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	missing := false
	for _, w := range want {
		if !strings.Contains(md.String(), w) {
			t.Errorf("bench.md lacks %q", w)
			missing = true
		}
	}
	if missing {
		t.Logf("bench.md:\n%s", md.String())
	}
	return md.String()
}
