package main

import (
	"context"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/proctest"
)

// A running daemon's /metrics gives every family help text and a type,
// with le-bucket histograms, and promtool check metrics accepts it with
// exit 0: no lint finding, the Go runtime and process metrics included.
func TestMetricsPassPromtool(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FSYNC=always")
	if err := client(t, d.socket).Incr(context.Background(), "post:1").Err(); err != nil {
		t.Fatal(err)
	}
	flush(t, d.socket)
	body := httpGet(t, "http://"+d.metricsAddr()+"/metrics")
	for _, want := range []string{
		"# HELP counterd_increments_accepted_total Increments accepted.",
		"# TYPE counterd_increments_accepted_total counter",
		"# TYPE counterd_flush_duration_seconds histogram",
		`counterd_flush_duration_seconds_bucket{le="+Inf"}`,
		`counterd_journal_fsync_seconds_bucket{le="+Inf"}`,
		`counterd_flush_batch_keys_bucket{le="+Inf"}`,
		"# TYPE process_resident_memory_bytes gauge",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Checked without promtool too, so a machine without it still fails
	// on a metric registered without help.
	if missing := proctest.MissingHelp(body); len(missing) > 0 {
		t.Errorf("/metrics families without help text: %v", missing)
	}
	proctest.CheckMetrics(t, body)
}
