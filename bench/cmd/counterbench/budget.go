package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/bench/internal/budget"
	"github.com/counterd/counterd/bench/internal/report"
)

// budgetApproach is one line of the budget tables: a SQL approach, or
// counterd's TAKE from one or more daemons sharing the budget.
type budgetApproach struct {
	name, summary string
	sql           *budget.Approach
	daemons       int
}

// takeTarget is the target: counterd's TAKE at the most clients
// at least this many times the lock-free update's grants per second.
const takeTarget = 100

var budgetApproaches = func() []budgetApproach {
	var out []budgetApproach
	for _, a := range budget.All() {
		out = append(out, budgetApproach{name: a.Name, summary: a.Summary, sql: &a})
	}
	return append(out,
		budgetApproach{name: "counterd", daemons: 1,
			summary: "`TAKE key` to one counterd, each client on its own connection to its Unix socket; the daemon serves grants from a leased share of the budget"},
		budgetApproach{name: "counterd-2", daemons: 2,
			summary: "the same with two counterd daemons sharing the budget, the clients split between them"},
	)
}()

func lookupBudgetApproach(name string) (budgetApproach, bool) {
	for _, a := range budgetApproaches {
		if a.name == name {
			return a, true
		}
	}
	return budgetApproach{}, false
}

func budgetApproachNames() []string {
	out := make([]string, len(budgetApproaches))
	for i, a := range budgetApproaches {
		out[i] = a.name
	}
	return out
}

// needsTake says whether the budget section runs a counterd cell.
func (s *settings) needsTake() bool {
	if !s.runs("budget") {
		return false
	}
	for _, name := range s.BudgetApproaches {
		if a, _ := lookupBudgetApproach(name); a.daemons > 0 {
			return true
		}
	}
	return false
}

// budgetPart describes the section's approaches for the report.
func (b *bench) budgetPart() report.BudgetPart {
	p := report.BudgetPart{Baseline: budget.LockFree.Name, Target: takeTarget}
	if b.cfg.runs("budget") {
		for _, name := range b.cfg.BudgetApproaches {
			a, _ := lookupBudgetApproach(name)
			p.BudgetApproaches = append(p.BudgetApproaches, report.Approach{Name: a.name, Summary: a.summary})
			if a.daemons > 0 {
				p.Targets = append(p.Targets, a.name)
			}
		}
	}
	if b.cfg.runs("tickets") {
		for _, a := range ticketApproaches() {
			p.TicketApproaches = append(p.TicketApproaches, report.Approach{Name: a.name, Summary: a.summary})
		}
	}
	return p
}

// budgets measures every budget approach at every size and concurrency.
func (b *bench) budgets(ctx context.Context) error {
	if err := budget.Setup(ctx, b.pool); err != nil {
		return err
	}
	for _, size := range b.cfg.BudgetSizes {
		for _, name := range b.cfg.BudgetApproaches {
			a, _ := lookupBudgetApproach(name)
			for _, c := range b.cfg.BudgetClients {
				if err := ctx.Err(); err != nil {
					return err
				}
				b.progress.step("budget %s %s c=%d", a.name, report.Thousands(size), c)
				row := report.BudgetRow{Approach: a.name, Budget: size, Clients: c}
				var err error
				if a.sql != nil {
					err = b.sqlBudgetCell(ctx, *a.sql, &row)
				} else {
					err = b.takeCell(ctx, a.daemons, &row)
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				b.addBudget(row, err)
			}
		}
	}
	return nil
}

// addBudget records a budget row; a row that failed counts towards the
// run's error, and an exact approach that overspent is shouted about.
func (b *bench) addBudget(r report.BudgetRow, err error) {
	if err != nil {
		r.Missing = true
		r.Note = "failed: " + oneLine(err.Error())
		b.failures++
		b.progress.note(fmt.Sprintf("budget %s %d c=%d failed: %v", r.Approach, r.Budget, r.Clients, err))
	}
	if r.Overspend > 0 && r.Approach != budget.Naive.Name {
		b.progress.note(fmt.Sprintf("WARNING: budget %s %d c=%d overspent by %d", r.Approach, r.Budget, r.Clients, r.Overspend))
	}
	b.budgetRows = append(b.budgetRows, r)
}

func (b *bench) sqlBudgetCell(ctx context.Context, a budget.Approach, row *report.BudgetRow) error {
	res, err := budget.Run(ctx, b.pool, a, budget.Load{
		ID: int64(b.nextSeed()), Budget: row.Budget, Clients: row.Clients, Duration: b.cfg.BudgetDuration,
	})
	if err != nil {
		return err
	}
	fillBudget(row, res.Tally)
	row.Remaining, row.Overspend, row.Underspend = res.Remaining, res.Overspend(), res.Underspend()
	return nil
}

func fillBudget(row *report.BudgetRow, t budget.Tally) {
	row.Elapsed, row.Grants, row.Errors, row.Exhausted = t.Elapsed, t.Grants, t.Errors, t.Exhausted
	row.Rate, row.P50, row.P99 = t.Rate(), t.P50, t.P99
	if t.Err != nil {
		row.Note = "first error: " + oneLine(t.Err.Error())
	}
}

// budgetTotals is one row of counterd's budget_totals view.
type budgetTotals struct {
	remaining, granted, leased int64
}

// takeCell spends a fresh budget through counterd's TAKE from daemons
// started for the cell, then stops them with SIGTERM, so that they return
// their leases, and reads budget_totals.
func (b *bench) takeCell(ctx context.Context, daemons int, row *report.BudgetRow) error {
	if b.takeAbsent != "" {
		row.Missing, row.Note = true, b.takeAbsent
		return nil
	}
	log, err := b.budgetLog()
	if err != nil {
		return err
	}
	cell := b.nextSeed()
	key := "counterbench:budget:" + strconv.FormatUint(cell, 10)
	srvs := make([]*counterdServer, 0, daemons)
	stopAll := func() error {
		var errs []error
		for _, s := range srvs {
			errs = append(errs, s.stop())
		}
		srvs = nil
		return errors.Join(errs...)
	}
	defer stopAll()
	for i := range daemons {
		s, err := b.spawnCounterd(ctx, filepath.Join(b.tmp, fmt.Sprintf("budget-%d-%d", cell, i)), log)
		if err != nil {
			return err
		}
		srvs = append(srvs, s)
	}
	// Before the product part is merged, counterd knows no TAKE: say so
	// once and skip every counterd cell.
	if err := srvs[0].ctl.Do(ctx, "TAKE", key+":probe").Err(); unknownCommand(err) {
		b.takeAbsent = "this counterd does not know TAKE (" + oneLine(err.Error()) + "); it needs issue 13's BUDGET and TAKE"
		b.progress.note("skipping the counterd budget cells: " + b.takeAbsent)
		row.Missing, row.Note = true, b.takeAbsent
		return nil
	}
	rem, err := srvs[0].ctl.Do(ctx, "BUDGET", key, row.Budget).Int64()
	if err != nil {
		return fmt.Errorf("BUDGET %s %d: %w", key, row.Budget, err)
	}
	if rem != row.Budget {
		return fmt.Errorf("BUDGET %s %d replied %d; want the new budget %d", key, row.Budget, rem, row.Budget)
	}
	ts, closeClients, err := takers(ctx, srvs, row.Clients, key)
	defer closeClients()
	if err != nil {
		return err
	}
	tally := budget.Drive(ctx, ts, b.cfg.BudgetDuration)
	closeClients()
	if err := stopAll(); err != nil {
		return fmt.Errorf("stop counterd: %w", err)
	}
	var tot budgetTotals
	err = b.pool.QueryRow(ctx, `SELECT remaining::bigint, granted::bigint, leased::bigint FROM budget_totals WHERE key = $1`, key).
		Scan(&tot.remaining, &tot.granted, &tot.leased)
	if err != nil {
		return fmt.Errorf("read budget_totals for %s: %w", key, err)
	}
	accountTake(row, tally, tot)
	return nil
}

// accountTake fills a counterd row from what the clients counted and what
// budget_totals says once the daemons are gone. Overspend counts the
// larger of the two grant counts; a difference between them, or a lease
// still out, is noted.
func accountTake(row *report.BudgetRow, t budget.Tally, tot budgetTotals) {
	fillBudget(row, t)
	row.Remaining = tot.remaining
	row.Overspend = budget.Overspend(row.Budget, max(t.Grants, tot.granted))
	row.Underspend = budget.Underspend(row.Budget, tot.granted, tot.remaining+tot.leased)
	var notes []string
	if row.Note != "" {
		notes = append(notes, row.Note)
	}
	if tot.granted != t.Grants {
		notes = append(notes, fmt.Sprintf("budget_totals says %s granted; clients were granted %s",
			report.Thousands(tot.granted), report.Thousands(t.Grants)))
	}
	if tot.leased != 0 {
		notes = append(notes, fmt.Sprintf("%s still leased after SIGTERM", report.Thousands(tot.leased)))
	}
	row.Note = strings.Join(notes, "; ")
}

// takers connects clients to the daemons in turn, each on its own
// connection, and returns a Taker per client and the function that
// closes them all.
func takers(ctx context.Context, srvs []*counterdServer, clients int, key string) ([]budget.Taker, func(), error) {
	var conns []*redis.Client
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	out := make([]budget.Taker, clients)
	for i := range out {
		c := redis.NewClient(&redis.Options{
			Network: "unix", Addr: srvs[i%len(srvs)].socket, Protocol: 2, DisableIdentity: true,
			MaxRetries: -1, PoolSize: 1, DialTimeout: 5 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		})
		conns = append(conns, c)
		// Connect now, so the first grant is not charged the dial.
		if err := c.Ping(ctx).Err(); err != nil {
			return nil, closeAll, fmt.Errorf("connect client %d: %w", i, err)
		}
		out[i] = func(ctx context.Context) (bool, error) {
			n, err := c.Do(ctx, "TAKE", key).Int64()
			if err != nil {
				return false, err
			}
			return takeReply(n)
		}
	}
	return out, closeAll, nil
}

// takeReply reads TAKE key's reply: 1 granted, 0 refused.
func takeReply(n int64) (bool, error) {
	switch n {
	case 1:
		return true, nil
	case 0:
		return false, nil
	}
	return false, fmt.Errorf("TAKE replied %d; want 1 or 0", n)
}

// unknownCommand reports whether err is a server's reply that it does not
// know the command.
func unknownCommand(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(strings.ToLower(rerr.Error()), "unknown command")
}

// budgetLog opens the log the budget section's daemons share.
func (b *bench) budgetLog() (*os.File, error) {
	if b.budgetLogFile == nil {
		f, err := b.createLog(report.BudgetLogFile)
		if err != nil {
			return nil, err
		}
		b.budgetLogFile = f
	}
	return b.budgetLogFile, nil
}
