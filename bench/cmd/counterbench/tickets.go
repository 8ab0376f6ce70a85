package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/bench/internal/tickets"
)

// redisList is the tickets section's name for seed 004's Redis answer.
const redisList = "redis-list"

// ticketApproach is one line of the tickets table: a SQL approach, or the
// Redis list.
type ticketApproach struct {
	name, summary string
	sql           *tickets.Approach
}

func ticketApproaches() []ticketApproach {
	var out []ticketApproach
	for _, a := range tickets.SQL() {
		out = append(out, ticketApproach{name: a.Name, summary: a.Summary, sql: &a})
	}
	return append(out, ticketApproach{name: redisList,
		summary: "the owner's ticket ids pushed in order onto a list in redis-server before the cell; a draw is `LPOP`, then `UPDATE ... SET remain = 0 WHERE id = $1 AND remain = 1` (only when redis-server is installed)"})
}

// ticketOwner numbers the owners, one per cell, so cells never share
// tickets.
func (b *bench) ticketOwner() int64 { return 2 * int64(b.nextSeed()) }

// ticketsSection draws one owner's tickets with every approach at every
// concurrency.
func (b *bench) ticketsSection(ctx context.Context) error {
	if err := tickets.Setup(ctx, b.pool); err != nil {
		return err
	}
	for _, a := range ticketApproaches() {
		for _, c := range b.cfg.TicketClients {
			if err := ctx.Err(); err != nil {
				return err
			}
			b.progress.step("tickets %s c=%d", a.name, c)
			row := report.TicketRow{Approach: a.name, Tickets: int64(b.cfg.Tickets), Clients: c}
			load := tickets.Load{Owner: b.ticketOwner(), Tickets: b.cfg.Tickets, Clients: c, Duration: b.cfg.BudgetDuration}
			var (
				res tickets.Result
				err error
			)
			if a.sql != nil {
				res, err = tickets.RunSQL(ctx, b.pool, *a.sql, load)
			} else {
				var missing bool
				res, missing, err = b.redisTickets(ctx, load)
				if missing {
					row.Missing, row.Note = true, b.redisAbsent
				}
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err == nil && !row.Missing {
				fillTickets(&row, res)
			}
			b.addTickets(row, err)
		}
	}
	return nil
}

func fillTickets(row *report.TicketRow, res tickets.Result) {
	row.Elapsed, row.Rate, row.P50, row.P99 = res.Elapsed, res.Rate(), res.P50, res.P99
	row.Draws, row.Retries, row.Failures, row.Duplicates, row.Errors = res.Draws, res.Retries, res.Failures, res.Duplicates, res.Errors
	row.Left = res.Left
	if res.Marked != res.Draws {
		row.Note = fmt.Sprintf("the table marks %d tickets drawn; clients drew %d", res.Marked, res.Draws)
	}
	if res.Err != nil {
		if row.Note != "" {
			row.Note += "; "
		}
		row.Note += "first error: " + oneLine(res.Err.Error())
	}
}

// addTickets records a tickets row; a row that failed counts towards the
// run's error, and a ticket drawn twice is shouted about.
func (b *bench) addTickets(r report.TicketRow, err error) {
	if err != nil {
		r.Missing = true
		r.Note = "failed: " + oneLine(err.Error())
		b.failures++
		b.progress.note(fmt.Sprintf("tickets %s c=%d failed: %v", r.Approach, r.Clients, err))
	}
	if r.Duplicates > 0 {
		b.progress.note(fmt.Sprintf("WARNING: tickets %s c=%d drew %d tickets twice", r.Approach, r.Clients, r.Duplicates))
	}
	b.ticketRows = append(b.ticketRows, r)
}

// redisTickets fills the owner's tickets, pushes their ids onto a list in
// redis-server and draws them with LPOP and a conditional UPDATE. missing
// says there is no redis-server (b.redisAbsent says why).
func (b *bench) redisTickets(ctx context.Context, load tickets.Load) (tickets.Result, bool, error) {
	srv := b.startRedis(ctx)
	if srv == nil {
		return tickets.Result{}, true, nil
	}
	if err := tickets.Fill(ctx, b.pool, load.Owner, load.Tickets); err != nil {
		return tickets.Result{}, false, err
	}
	ids, err := tickets.Undrawn(ctx, b.pool, load.Owner)
	if err != nil {
		return tickets.Result{}, false, err
	}
	list := "tickets:" + strconv.FormatInt(load.Owner, 10)
	if err := srv.ctl.Del(ctx, list).Err(); err != nil {
		return tickets.Result{}, false, fmt.Errorf("DEL %s: %w", list, err)
	}
	for chunk := range chunks(ids, 1000) {
		if err := srv.ctl.RPush(ctx, list, chunk...).Err(); err != nil {
			return tickets.Result{}, false, fmt.Errorf("RPUSH %s: %w", list, err)
		}
	}
	var clients []*redis.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	draws := make([]tickets.Draw, load.Clients)
	for i := range draws {
		rc := redis.NewClient(&redis.Options{
			Network: "unix", Addr: srv.socket, Protocol: 2, DisableIdentity: true,
			MaxRetries: -1, PoolSize: 1, DialTimeout: 5 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		})
		clients = append(clients, rc)
		if err := rc.Ping(ctx).Err(); err != nil {
			return tickets.Result{}, false, fmt.Errorf("connect client %d to redis-server: %w", i, err)
		}
		pc, err := b.pool.Acquire(ctx)
		if err != nil {
			return tickets.Result{}, false, fmt.Errorf("connect client %d: %w", i, err)
		}
		defer pc.Release()
		conn := pc.Conn()
		draws[i] = func(ctx context.Context) (int64, int64, error) {
			// A popped id the table says is drawn already would be a
			// double draw; it is retried, and counted.
			for try := int64(0); ; try++ {
				id, err := rc.LPop(ctx, list).Int64()
				if errors.Is(err, redis.Nil) {
					return 0, try, nil
				}
				if err != nil {
					return 0, try, err
				}
				ok, err := tickets.Mark(ctx, conn, id)
				if err != nil {
					return 0, try, err
				}
				if ok {
					return id, try, nil
				}
			}
		}
	}
	res, err := tickets.Measure(ctx, b.pool, load, draws)
	return res, false, err
}

// chunks yields ids as argument lists of at most n.
func chunks(ids []int64, n int) func(func([]any) bool) {
	return func(yield func([]any) bool) {
		for len(ids) > 0 {
			k := min(n, len(ids))
			args := make([]any, k)
			for i, id := range ids[:k] {
				args[i] = id
			}
			if !yield(args) {
				return
			}
			ids = ids[k:]
		}
	}
}
