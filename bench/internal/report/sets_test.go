package report_test

import (
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/report"
)

// TestSets writes one run of the sets cells at one depth and checks the
// committed rates, the checks, the ratios with the targets' verdicts and
// the PostgreSQL CPU per request.
func TestSets(t *testing.T) {
	t.Parallel()
	row := func(command, server string, pipeline int, requests int64) report.Row {
		r := report.Row{Section: report.Sets, Approach: server, Command: command, Keys: "100 posts", Clients: 32, Pipeline: pipeline, Run: 1,
			Elapsed: time.Second, Increments: requests, Rate: float64(requests), RowsWritten: -1, New: requests, Members: 5_000, Checked: true, Stored: requests,
			CPU: report.CPU{PG: report.Share{Time: time.Second, Known: true}}}
		if command == report.CommandSAddRepeat {
			r.New, r.Stored = 0, 0
		}
		if server == report.Counterd {
			// A drain of a second halves every committed rate.
			r.Drain = time.Second
		}
		return r
	}
	r := &report.Report{Rows: []report.Row{
		row(report.CommandIncr, report.Counterd, 1, 100_000),
		row(report.CommandSAddNew, report.Counterd, 1, 60_000),
		row(report.CommandSAddRepeat, report.Counterd, 1, 200_000),
		row(report.CommandSAddNew, report.RedisEverysec, 1, 60_000),
		{Section: report.Sets, Approach: report.RedisEverysec, Command: report.CommandSAddRepeat, Pipeline: 1, Run: 1, Missing: true, Note: "redis-server did not start"},
		row(report.CommandSAddNew, report.AppLikes, 1, 5_000),
		row(report.CommandSAddRepeat, report.AppLikes, 1, 10_000),
	}}
	r.Rows[2].New = 3 // a repeat counted new
	r.Rows[1].Rounds = 1_000
	markdownHas(t, r,
		"## Exact sets (SADD)",
		"| INCR | counterd | 1 | 1 | 100,000 | 100,000 | 50,000 | 0 | 0 | — | — | exact |",
		"| SADD, new members | counterd | 1 | 1 | 60,000 | 60,000 | 30,000 | 0 | 0 | 60,000 | 5,000 | exact | — | 16.7 | — | — | 1 s | 60 |",
		"| SADD, repeats | counterd | 1 | 1 | 200,000 | 200,000 | 100,000 | 0 | 0 | 3 | 5,000 | replies counted 3 new; want 0 |",
		"| SADD, new members | app pattern (likes + like_count) | 1 | 1 | 5,000 | 5,000 | 5,000 |",
		"| SADD, new members counterd -P 1 ÷ INCR counterd -P 1 | 0.60× | ≥ 0.5× | met |",
		"| SADD, new members counterd -P 1 ÷ SADD, new members app pattern (likes + like_count) | 6.00× | ≥ 5× | met |",
		"| SADD, new members counterd -P 1 ÷ SADD, new members redis-server (appendfsync everysec) -P 1 | 0.50× | — | — |",
		"| SADD, repeats counterd -P 1 ÷ SADD, repeats app pattern (likes + like_count) | 10.00× | ≥ 5× | met |",
		"| SADD, repeats counterd -P 1 ÷ SADD, repeats redis-server (appendfsync everysec) -P 1 | — | — | — |",
		"| SADD, new members | counterd | 1 | 16.7 | — |",
		"| SADD, new members | app pattern (likes + like_count) | 1 | 200 | — |",
	)
	r.Rows[1].Rate, r.Rows[1].Elapsed = 8_000, 7500*time.Millisecond
	markdownHas(t, r,
		// 60,000 over 8.5 s is 7,058/s: 0.14× INCR's committed 50,000/s,
		// 1.4× the pattern's.
		"| SADD, new members counterd -P 1 ÷ INCR counterd -P 1 | 0.14× | ≥ 0.5× | not met |",
		"| SADD, new members counterd -P 1 ÷ SADD, new members app pattern (likes + like_count) | 1.41× | ≥ 5× | not met |",
	)
}
