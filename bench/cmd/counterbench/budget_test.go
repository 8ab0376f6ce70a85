package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/bench/internal/budget"
	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/pgtest"
)

// TestBudgetShort runs the budget and tickets sections briefly and checks
// what their rows claim: exact approaches never overspend or under-spend,
// naive's grants and remainder add up, no ticket is drawn twice, SKIP
// LOCKED never fails, and the counterd cells either say counterd knows no
// TAKE or measured a budget without overspend. Not parallel: it starts
// processes, which TestRunShort's leftover check would see.
func TestBudgetShort(t *testing.T) {
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
	out := t.TempDir()
	env := append(shortEnv(t, db, out),
		"COUNTERBENCH_SECTIONS=budget,tickets",
		"COUNTERBENCH_BUDGETS=150,1000000",
		"COUNTERBENCH_BUDGET_CLIENTS=2,4",
		"COUNTERBENCH_BUDGET_DURATION=300ms",
		"COUNTERBENCH_TICKETS=60",
		"COUNTERBENCH_TICKET_CLIENTS=2,4",
	)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, nil, env, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
	if !strings.Contains(stderr.String(), "[1/28] budget naive 150 c=2") || !strings.Contains(stderr.String(), "[28/28] tickets redis-list c=4") {
		t.Errorf("progress lines missing from stderr:\n%s", stderr.String())
	}
	rows := readCSV(t, filepath.Join(out, report.BudgetCSVFile))
	if len(rows) != 20+8 {
		t.Fatalf("%d rows; want 28", len(rows))
	}
	_, redisErr := exec.LookPath("redis-server")
	for _, r := range rows {
		name := r["section"] + " " + r["approach"] + " " + r["size"] + " c=" + r["clients"]
		if r["missing"] == "true" {
			switch {
			case strings.HasPrefix(r["approach"], "counterd") && strings.Contains(r["note"], "does not know TAKE"):
			case r["approach"] == redisList && redisErr != nil && strings.Contains(r["note"], "redis-server"):
			default:
				t.Errorf("%s missing: %q", name, r["note"])
			}
			continue
		}
		if num(t, r, "errors") != 0 || num(t, r, "ops") <= 0 {
			t.Errorf("%s: %s ops, %s errors (%s); want some and none", name, r["ops"], r["errors"], r["note"])
			continue
		}
		size, ops, remaining := num(t, r, "size"), num(t, r, "ops"), num(t, r, "remaining")
		if r["section"] == report.Tickets {
			if num(t, r, "duplicates") != 0 || ops+remaining != size || r["note"] != "" {
				t.Errorf("%s: %d drawn + %d left of %d, %s twice (%s); want all accounted, none twice", name, ops, remaining, size, r["duplicates"], r["note"])
			}
			if r["approach"] == "skip-locked" && (num(t, r, "failures") != 0 || num(t, r, "retries") != 0) {
				t.Errorf("%s: %s failures, %s retries; want none", name, r["failures"], r["retries"])
			}
			continue
		}
		if num(t, r, "underspend") != 0 {
			t.Errorf("%s: under-spent %s", name, r["underspend"])
		}
		if r["approach"] == budget.Naive.Name {
			if ops+remaining != size {
				t.Errorf("%s: %d granted + %d remaining; want %d", name, ops, remaining, size)
			}
			continue
		}
		if num(t, r, "overspend") != 0 || ops+remaining != size || (r["exhausted"] == "true" && ops != size) {
			t.Errorf("%s: %d granted, %d remaining, overspent %s, exhausted %s; want every unit once", name, ops, remaining, r["overspend"], r["exhausted"])
		}
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## Budgets", "### Budget of 150", "| counterd ÷ lock-free |", "## Tickets", "| skip-locked | 60 | 4 |"} {
		if !bytes.Contains(md, []byte(s)) {
			t.Errorf("bench.md lacks %q", s)
		}
	}
}

func TestAccountTake(t *testing.T) {
	t.Parallel()
	f := func(size int64, tally budget.Tally, tot budgetTotals, over, under int64, note string) {
		t.Helper()
		row := report.BudgetRow{Approach: "counterd", Budget: size, Clients: 4}
		accountTake(&row, tally, tot)
		if row.Overspend != over || row.Underspend != under || row.Remaining != tot.remaining {
			t.Errorf("budget %d, %d granted, totals %+v: overspend %d under-spend %d remaining %d; want %d, %d, %d",
				size, tally.Grants, tot, row.Overspend, row.Underspend, row.Remaining, over, under, tot.remaining)
		}
		if !strings.Contains(row.Note, note) || (note == "" && row.Note != "") {
			t.Errorf("note %q; want %q", row.Note, note)
		}
	}
	f(100, budget.Tally{Grants: 100, Exhausted: true}, budgetTotals{granted: 100}, 0, 0, "")
	f(100, budget.Tally{Grants: 60}, budgetTotals{remaining: 40, granted: 60}, 0, 0, "")
	// A lease a daemon did not return before the read is not under-spend.
	f(100, budget.Tally{Grants: 60}, budgetTotals{remaining: 30, granted: 60, leased: 10}, 0, 0, "10 still leased")
	// Units neither granted nor back: forfeited.
	f(100, budget.Tally{Grants: 60}, budgetTotals{remaining: 30, granted: 60}, 0, 10, "")
	// Clients saw more grants than the database recorded: the larger
	// count decides overspend.
	f(100, budget.Tally{Grants: 102}, budgetTotals{granted: 100}, 2, 0, "budget_totals says 100 granted; clients were granted 102")
	f(100, budget.Tally{Grants: 50, Err: errors.New("ERR no database")}, budgetTotals{remaining: 50, granted: 50}, 0, 0, "first error: ERR no database")
}

// replyError is an error reply, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

func TestTakeReply(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n       int64
		granted bool
		err     bool
	}{{1, true, false}, {0, false, false}, {2, false, true}, {-1, false, true}} {
		granted, err := takeReply(tc.n)
		if granted != tc.granted || (err != nil) != tc.err {
			t.Errorf("takeReply(%d) = %v, %v; want %v, error %v", tc.n, granted, err, tc.granted, tc.err)
		}
	}
	if !unknownCommand(replyError("ERR unknown command 'TAKE', with args beginning with: 'k'")) {
		t.Error("unknown command reply not recognised")
	}
	for _, err := range []error{nil, replyError("ERR no budget k"), errors.New("unknown command, but not a reply")} {
		if unknownCommand(err) {
			t.Errorf("unknownCommand(%v) = true; want false", err)
		}
	}
}
