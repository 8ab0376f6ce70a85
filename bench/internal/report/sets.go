package report

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
)

// Sets cells are counterd's exact sets (SADD of new members and of
// members already present) beside INCR in the same shape, redis-server's
// SADD with appendfsync everysec, and the application's own likes
// pattern in SQL, on a few hot keys.
const Sets = "sets"

// AppLikes names the application's own pattern in the sets section: a
// likes table with a row per (post, user) and posts.like_count, one
// transaction per like.
const AppLikes = "app-likes"

// Commands of the sets section, as Row.Command names them (INCR is
// CommandIncr).
const (
	CommandSAddNew    = "SADD, new members"
	CommandSAddRepeat = "SADD, repeats"
)

// Targets of the sets section: counterd's SADD per second at least
// SetsIncrTarget of its INCR per second in the same shape, and at least
// SetsAppTarget of the application's own pattern.
const (
	SetsIncrTarget = 0.5
	SetsAppTarget  = 5
)

// SetsCommittedRate is a sets row's requests per second counted once
// they are committed: for counterd, the requests (for INCR, the stored
// increments) over load plus final FLUSH (SADD replies wait for their
// round's commit anyway); for the application's pattern, which commits
// before it replies, and for redis-server, requests over the load. -1 when
// unknown.
func (r Row) SetsCommittedRate() float64 {
	switch {
	case r.Missing || r.Elapsed <= 0:
		return -1
	case r.Approach != Counterd:
		return r.Rate
	case r.Command == CommandIncr:
		return r.CommittedRate()
	}
	return r.SettledRate()
}

// RequestsPerRound is requests per committed round, or -1.
func (r Row) RequestsPerRound() float64 {
	if r.Rounds <= 0 || r.Increments <= 0 {
		return -1
	}
	return float64(r.Increments) / float64(r.Rounds)
}

// setsWant is the new members a SADD row's replies must count: every
// request for new members, none for repeats.
func setsWant(r Row) int64 {
	if r.Command == CommandSAddRepeat {
		return 0
	}
	return r.Increments
}

// setsCheck says whether a sets row adds up: INCR's total; for SADD, the
// replies counting the members that were new (all, or none for repeats)
// and the stored cardinality (counterd's total, redis-server's SCARDs,
// the pattern's like_count) growing by as much.
func setsCheck(r Row) string {
	if r.Command == CommandIncr {
		return totalCell(r)
	}
	if !r.Checked || r.New < 0 {
		return "not checked"
	}
	want := setsWant(r)
	switch {
	case r.New != want:
		return fmt.Sprintf("replies counted %s new; want %s", Thousands(r.New), Thousands(want))
	case r.Stored != r.New:
		return fmt.Sprintf("cardinality grew %s for %s new", Thousands(r.Stored), Thousands(r.New))
	}
	return "exact"
}

func setsMarkdown(b *bufio.Writer, r *Report) {
	rows := section(r.Rows, Sets)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## Exact sets (SADD)\n\n")
	fmt.Fprintf(b, "counterbench's own clients, in a closed loop, each sending one command or a pipeline of 16 and waiting for the replies, for the cell's duration (or until a request cap): "+
		"`SADD post:N:likes USER` with user ids never sent before (*new members*), then, to the same keys, the same members again (*repeats*, in the same order), to counterd and to redis-server with appendfsync everysec; `INCR post:N:likes` to counterd in the same shape; "+
		"and the application's own pattern (%s) through pgx: per like one transaction, `INSERT INTO likes (post_id, user_id) ... ON CONFLICT DO NOTHING` and, when it inserted, `UPDATE posts SET like_count = like_count + 1 WHERE id = $1`, unpipelined (-P 1) as an application sends it. "+
		"User u goes to post u mod the posts. Each group of cells has keys (behind a prefix of its own, e.g. `s1b:post:7:likes`) or tables of its own, and each run starts with a different group. "+
		"counterd's `SADD` reply waits for its round's commit; every counterd cell ends with a FLUSH (*drain*), and *committed/s* counts requests (for INCR, the increments stored) over load plus drain; for redis-server and the application's pattern it is their requests per second. "+
		"*new* is the members the replies counted as new, *members* what the keys hold afterwards (SCARDs summed; the pattern's likes rows), and *check* compares the replies with the stored cardinality (counterd's total, redis-server's SCARDs, the pattern's `like_count`); the run also checked each key's SCARD (each post's `like_count` and likes rows) against the distinct members sent to it, and failed the cell otherwise. "+
		"*CPU µs/request* as in the ingest section: *server* counterd's or redis-server's own, *PostgreSQL* the backends of counterd's (the pattern's) connections, *whole PostgreSQL* every process of the server, *client* counterbench's own process (the load generator; pgx for the pattern). *requests/round* is counterd's requests per committed round (the drain's included).\n\n", serverLabel(AppLikes))
	var body [][]string
	for _, x := range rows {
		run := "—"
		if x.Run > 0 {
			run = strconv.Itoa(x.Run)
		}
		if x.Missing {
			body = append(body, []string{x.Command, serverLabel(x.Approach), strconv.Itoa(x.Pipeline), run, "—", "—", "—", "—", "—", "—", "—", "—", "—", "—", "—", "—", "—", "missing: " + x.Note})
			continue
		}
		newCol, members := "—", "—"
		if x.Command != CommandIncr {
			newCol, members = Thousands(x.New), Thousands(x.Members)
		}
		body = append(body, []string{
			x.Command, serverLabel(x.Approach), strconv.Itoa(x.Pipeline), run, Thousands(x.Increments), Thousands(int64(x.Rate)), rateOrDash(x.SetsCommittedRate()),
			Duration(x.P50), Duration(x.P99), newCol, members, setsCheck(x),
			cpuCell(x, x.CPU.Server), cpuCell(x, x.CPU.PG), cpuCell(x, x.CPU.PGServer), cpuCell(x, x.CPU.Client), drainCell(x), perCell(x.RequestsPerRound()),
		})
	}
	table(b, []string{"command", "server", "-P", "run", "requests", "requests/s", "committed/s", "p50", "p99", "new", "members", "check",
		"CPU µs/request server", "PostgreSQL", "whole PostgreSQL", "client", "drain", "requests/round"}, body)
	setsTargets(b, rows)
	setsPGCPU(b, rows)
}

// setsSide is one side of a sets ratio: a command to a server at a
// pipeline depth (0: whatever depth its rows have, the pattern's 1).
type setsSide struct {
	command, server string
	pipeline        int
}

func (s setsSide) label() string {
	l := s.command + " " + serverLabel(s.server)
	if s.pipeline > 0 {
		l += " -P " + strconv.Itoa(s.pipeline)
	}
	return l
}

func (s setsSide) matches(x Row) bool {
	return x.Command == s.command && x.Approach == s.server && (s.pipeline == 0 || x.Pipeline == s.pipeline) && !x.Missing
}

// setsComparison is one ratio of committed rates; target is 0 when none
// applies.
type setsComparison struct {
	num, den setsSide
	target   float64
}

// setsComparisons are the section's ratios at every pipeline depth its
// counterd rows have: SADD against INCR and against the application's
// pattern (the targets), then against redis-server.
func setsComparisons(rows []Row) []setsComparison {
	var depths []int
	for _, x := range rows {
		if x.Approach == Counterd && !slices.Contains(depths, x.Pipeline) {
			depths = append(depths, x.Pipeline)
		}
	}
	var out []setsComparison
	for _, p := range depths {
		for _, cmd := range []string{CommandSAddNew, CommandSAddRepeat} {
			sadd := setsSide{cmd, Counterd, p}
			out = append(out,
				setsComparison{sadd, setsSide{CommandIncr, Counterd, p}, SetsIncrTarget},
				setsComparison{sadd, setsSide{cmd, AppLikes, 0}, SetsAppTarget},
				setsComparison{sadd, setsSide{cmd, RedisEverysec, p}, 0})
		}
	}
	return out
}

// ratios divides c's committed rate by its denominator's within each run
// both measured.
func (c setsComparison) ratios(rows []Row) []float64 {
	var v []float64
	for _, x := range rows {
		if !c.num.matches(x) {
			continue
		}
		for _, y := range rows {
			if c.den.matches(y) && y.Run == x.Run {
				if n, d := x.SetsCommittedRate(), y.SetsCommittedRate(); n >= 0 && d > 0 {
					v = append(v, n/d)
				}
				break
			}
		}
	}
	return v
}

// setsTargets writes the ratios of committed rates within each run
// (median, and the range over runs) with the targets' verdicts.
func setsTargets(b *bufio.Writer, rows []Row) {
	var body [][]string
	for _, c := range setsComparisons(rows) {
		v := c.ratios(rows)
		target, verdict := "—", "—"
		if c.target > 0 {
			target = fmt.Sprintf("≥ %g×", c.target)
			if len(v) > 0 {
				verdict = "not met"
				if median(v) >= c.target {
					verdict = "met"
				}
			}
		}
		body = append(body, []string{c.num.label() + " ÷ " + c.den.label(),
			spread(v, func(f float64) string { return fmt.Sprintf("%.2f×", f) }), target, verdict})
	}
	fmt.Fprintf(b, "Committed requests per second side by side, within each run: the median over runs, and in brackets the lowest and highest.\n\n")
	table(b, []string{"ratio", "median [range]", "target", "verdict"}, body)
}

// setsPGCPU writes what a request cost PostgreSQL, median over runs, for
// counterd's and the pattern's cells.
func setsPGCPU(b *bufio.Writer, rows []Row) {
	var body [][]string
	var seen []setsSide
	for _, x := range rows {
		s := setsSide{x.Command, x.Approach, x.Pipeline}
		if x.Approach == RedisEverysec || x.Missing || slices.Contains(seen, s) {
			continue
		}
		seen = append(seen, s)
		med := func(share func(Row) Share) string {
			var v []float64
			for _, y := range rows {
				if s.matches(y) {
					if us := y.MicrosPerIncr(share(y)); us >= 0 {
						v = append(v, us)
					}
				}
			}
			return spread(v, func(f float64) string { return fmt.Sprintf("%.3g", f) })
		}
		body = append(body, []string{s.command, serverLabel(s.server), strconv.Itoa(s.pipeline),
			med(func(y Row) Share { return y.CPU.PG }), med(func(y Row) Share { return y.CPU.PGServer })})
	}
	fmt.Fprintf(b, "PostgreSQL CPU per request, µs (median over runs [range]): the backends of counterd's or the pattern's connections, and the whole server.\n\n")
	table(b, []string{"command", "server", "-P", "PostgreSQL backends", "whole PostgreSQL"}, body)
}

// setsRecord fills the columns only sets rows have.
func setsRecord(r Row, v map[string]string) {
	if r.Command != CommandIncr && r.New >= 0 {
		v["new"] = strconv.FormatInt(r.New, 10)
		v["members"] = strconv.FormatInt(r.Members, 10)
	}
	if c := r.SetsCommittedRate(); c >= 0 {
		v["committed_rate"] = strconv.FormatFloat(c, 'f', 1, 64)
	}
}
