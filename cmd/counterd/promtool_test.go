package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/pgtest"
)

// promtool finds promtool, installing Debian's prometheus package when it
// is missing and this test runs as root with apt-get (scripts/test.sh
// installs it up front, so CI always has it).
func promtool(t *testing.T) string {
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

// A running daemon's /metrics parses with promtool, with # TYPE lines and
// le-bucket histograms, and promtool's lints find nothing in counterd's
// own metrics except the missing help text (VictoriaMetrics/metrics
// writes # HELP lines without text). The Go runtime and process metrics
// are the library's and keep their names.
func TestMetricsPassPromtool(t *testing.T) {
	t.Parallel()
	tool := promtool(t)
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FSYNC=always")
	if err := client(t, d.socket).Incr(context.Background(), "post:1").Err(); err != nil {
		t.Fatal(err)
	}
	flush(t, d.socket)
	body := httpGet(t, "http://"+d.metricsAddr()+"/metrics")
	for _, want := range []string{
		"# TYPE counterd_increments_accepted_total counter",
		"# TYPE counterd_flush_duration_seconds histogram",
		`counterd_flush_duration_seconds_bucket{le="+Inf"}`,
		`counterd_journal_fsync_seconds_bucket{le="+Inf"}`,
		`counterd_flush_batch_keys_bucket{le="+Inf"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	// 3 means lint findings only; anything else is a parse error.
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 3) {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "counterd_") && !strings.HasSuffix(line, "no help text") {
			t.Errorf("promtool: %s", line)
		}
	}
}
