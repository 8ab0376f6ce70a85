package proctest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Promtool finds promtool, installing Debian's prometheus package when it
// is missing and the test runs as root with apt-get (scripts/test.sh
// installs it up front, so CI always has it), and skips the test when
// neither works.
func Promtool(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		t.Skip("promtool is not installed and cannot be (needs root and apt-get): install the prometheus package to run this test")
	}
	cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", "prometheus")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("installing promtool failed: %v\n%s", err, out)
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("apt-get installed prometheus but promtool is not on PATH: %v", err)
	}
	return p
}

// CheckMetrics fails the test unless `promtool check metrics` accepts
// body with exit 0: it parses, and its lints (help text, names, types)
// find nothing.
func CheckMetrics(t testing.TB, body string) {
	t.Helper()
	cmd := exec.Command(Promtool(t), "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v; want exit 0\n%s", err, out.String())
	}
}

// MissingHelp returns the metric families of a Prometheus text exposition
// whose # HELP line has no text or that have no # HELP line at all, so a
// test can check help text without promtool.
func MissingHelp(body string) []string {
	helped := map[string]bool{}
	var missing []string
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			family, text, _ := strings.Cut(rest, " ")
			helped[family] = strings.TrimSpace(text) != ""
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			family, _, _ := strings.Cut(rest, " ")
			if !helped[family] {
				missing = append(missing, family)
			}
		}
	}
	return missing
}
