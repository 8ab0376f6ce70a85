package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/latency"
	"github.com/counterd/counterd/internal/database"
	"github.com/counterd/counterd/internal/resp"
)

// setsPipelines are the depths of the sets section's Redis-protocol
// cells, -P 16 first as in the ingest section. The application's pattern
// sends one like at a time.
var setsPipelines = []int{16, 1}

// setsAppName is the application_name of the likes pattern's
// connections, which finds their backends for the CPU readings.
const setsAppName = "counterbench-sets-app"

const (
	// setsReplyGrace bounds how long after a cell's duration its clients
	// wait for the replies still owed: a server that stops answering
	// fails the cell then rather than hanging the run.
	setsReplyGrace = time.Minute
	// setsMaxRounds bounds one client's round trips whatever the clock
	// says.
	setsMaxRounds = 1 << 32
)

// setsGroup is cells that share keys: INCR alone, or SADD of new members
// followed by SADD of the same members again, to one server at one
// pipeline depth.
type setsGroup struct {
	server   string // report.Counterd, report.RedisEverysec or report.AppLikes
	pipeline int
	incr     bool
}

// setsGroups are one run's groups, in the first run's order.
func setsGroups() []setsGroup {
	var out []setsGroup
	for _, p := range setsPipelines {
		out = append(out, setsGroup{report.Counterd, p, true}, setsGroup{report.Counterd, p, false}, setsGroup{report.RedisEverysec, p, false})
	}
	return append(out, setsGroup{report.AppLikes, 1, false})
}

func (g setsGroup) commands() []string {
	if g.incr {
		return []string{report.CommandIncr}
	}
	return []string{report.CommandSAddNew, report.CommandSAddRepeat}
}

// setsCellCount is the cells of one run of the sets section.
func setsCellCount() int {
	n := 0
	for _, g := range setsGroups() {
		n += len(g.commands())
	}
	return n
}

// setsGroupState is what a group's first cell leaves for its second: the
// keys' prefix, the new members each client had answered, and each
// key's distinct members sent so far.
type setsGroupState struct {
	prefix string
	sent   []int
	want   []int64
	// failed says the new members' cell did not complete, so there is
	// nothing known to repeat.
	failed bool
}

// user is client c's i-th new member in a cell of clients clients: every
// user id is sent once.
func setsUser(c, i, clients int) int64 { return int64(i)*int64(clients) + int64(c) }

// post is the post (key) user u likes.
func (b *bench) setsPost(u int64) int { return int(u % int64(b.cfg.SetsPosts)) }

func (st *setsGroupState) key(post int) string {
	return st.prefix + "post:" + strconv.Itoa(post) + ":likes"
}

func (st *setsGroupState) keys(posts int) []string {
	out := make([]string, posts)
	for p := range out {
		out[p] = st.key(p)
	}
	return out
}

// user is the user client c sends as its i-th member in the cell cmd:
// new ones, or, for repeats, its own new members again in the same
// order, round and round.
func (st *setsGroupState) user(cmd string, c, i, clients int) int64 {
	if cmd == report.CommandSAddRepeat {
		i %= st.sent[c]
	}
	return setsUser(c, i, clients)
}

// limit is how many commands client c may send in the cell cmd: for
// repeats none when it had no new member answered.
func (st *setsGroupState) limit(cmd string, c int) int {
	if cmd == report.CommandSAddRepeat && st.sent[c] == 0 {
		return 0
	}
	return setsMaxRounds
}

// recordSent keeps the new members each client had answered, and counts
// them by key.
func (b *bench) recordSent(st *setsGroupState, sent []int) {
	st.sent = sent
	st.want = make([]int64, b.cfg.SetsPosts)
	for c, n := range sent {
		for i := range n {
			st.want[b.setsPost(setsUser(c, i, len(sent)))]++
		}
	}
}

// setsSection runs every group SetsRuns times, each run starting with a
// different group, as the uniques section does. Every group has keys (for
// the likes pattern, tables) of its own.
func (b *bench) setsSection(ctx context.Context) error {
	groups := setsGroups()
	for run := 1; run <= b.cfg.SetsRuns; run++ {
		for i := range groups {
			gi := (i + run - 1) % len(groups)
			g := groups[gi]
			st := &setsGroupState{prefix: fmt.Sprintf("s%d%c:", run, 'a'+gi)}
			for _, cmd := range g.commands() {
				b.progress.step("sets %s %s -P %d (run %d)", cmd, g.server, g.pipeline, run)
				row := report.Row{
					Section: report.Sets, Approach: g.server, Command: cmd, Keys: fmt.Sprintf("%d posts", b.cfg.SetsPosts),
					Clients: b.cfg.SetsClients, Pipeline: g.pipeline, Run: run, RowsWritten: -1, New: -1, SeenRows: -1, Members: -1,
				}
				var err error
				if cmd == report.CommandSAddRepeat && st.failed {
					row.Missing, row.Note = true, "the new members' cell before it did not complete: nothing to repeat"
				} else {
					err = b.setsCell(ctx, g, cmd, st, &row)
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if cmd == report.CommandSAddNew && (err != nil || row.Missing) {
					st.failed = true
				}
				b.add(row, err)
			}
		}
	}
	return nil
}

func (b *bench) setsCell(ctx context.Context, g setsGroup, cmd string, st *setsGroupState, row *report.Row) error {
	switch g.server {
	case report.AppLikes:
		return b.likesCell(ctx, cmd, st, row)
	case report.RedisEverysec:
		return b.setsRedisCell(ctx, cmd, st, row)
	}
	return b.setsCounterdCell(ctx, cmd, st, row)
}

// setsLoadFor is the Redis-protocol load of the cell cmd at row's depth.
func (b *bench) setsLoadFor(cmd string, st *setsGroupState, row *report.Row, socket string) setsLoad {
	clients := b.cfg.SetsClients
	l := setsLoad{
		network: "unix", addr: socket, clients: clients, pipeline: row.Pipeline,
		duration: b.cfg.Duration, requests: b.cfg.SetsRequests,
		limit: func(c int) int { return st.limit(cmd, c) },
	}
	if cmd == report.CommandIncr {
		incr := resp.AppendBulkString(resp.AppendArrayHeader(nil, 2), "INCR")
		l.command = func(buf []byte, c, i int) []byte {
			return resp.AppendBulkString(append(buf, incr...), st.key(b.setsPost(setsUser(c, i, clients))))
		}
		return l
	}
	sadd := resp.AppendBulkString(resp.AppendArrayHeader(nil, 3), "SADD")
	l.command = func(buf []byte, c, i int) []byte {
		u := st.user(cmd, c, i, clients)
		buf = resp.AppendBulkString(append(buf, sadd...), st.key(b.setsPost(u)))
		var num [20]byte
		return resp.AppendBulk(buf, strconv.AppendInt(num[:0], u, 10))
	}
	return l
}

// setsCounterdCell measures one cell on counterd (the ingest section's
// daemon, logging into counterd.log): its CPU and PostgreSQL's through
// the final FLUSH, then checks what the keys hold.
func (b *bench) setsCounterdCell(ctx context.Context, cmd string, st *setsGroupState, row *report.Row) error {
	srv, err := b.startCounterd(ctx)
	if err != nil {
		return err
	}
	before, err := srv.scrape(ctx)
	if err != nil {
		return err
	}
	var res setsResult
	after, err := b.counterdAround(ctx, srv, row, func() error {
		var err error
		res, err = b.runSetsLoad(ctx, b.setsLoadFor(cmd, st, row, srv.socket), row)
		return err
	})
	if err != nil {
		return err
	}
	// Rounds as the sustain section counts them: one batch-size
	// observation per committed round, the drain's included.
	row.Rounds = int64(after["counterd_flush_batch_keys_count"] - before["counterd_flush_batch_keys_count"])
	if cmd == report.CommandIncr {
		// counterdAround compared the total with the increments.
		return nil
	}
	row.New = res.sum
	if cmd == report.CommandSAddNew {
		b.recordSent(st, res.sent)
	}
	if err := b.checkScards(ctx, srv.ctl, st, row); err != nil {
		return err
	}
	var memberRows int64
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM counter_set_members WHERE starts_with(key, $1) AND added_at IS NOT NULL`, st.prefix).Scan(&memberRows); err != nil {
		return fmt.Errorf("count counter_set_members: %w", err)
	}
	if memberRows != row.Members {
		return fmt.Errorf("counter_set_members holds %d rows of the cell's keys; their SCARDs sum to %d", memberRows, row.Members)
	}
	return checkSetsReplies(row)
}

// setsRedisCell measures one cell on redis-server with appendfsync
// everysec (the ingest section's), emptied before a group's first cell.
func (b *bench) setsRedisCell(ctx context.Context, cmd string, st *setsGroupState, row *report.Row) error {
	srv, why := b.startRedisFlavor(ctx, redisEverysec)
	if srv == nil {
		row.Missing, row.Note = true, why
		return nil
	}
	var before int64
	if cmd == report.CommandSAddNew {
		if err := srv.ctl.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("FLUSHALL: %w", err)
		}
	} else {
		before = sum(st.want)
	}
	cpu := startCPU(ctx, srv.proc.Pid(), nil)
	res, err := b.runSetsLoad(ctx, b.setsLoadFor(cmd, st, row, srv.socket), row)
	cpu.finish(ctx, row)
	if err != nil {
		return err
	}
	row.New = res.sum
	if cmd == report.CommandSAddNew {
		b.recordSent(st, res.sent)
	}
	if err := b.checkScards(ctx, srv.ctl, st, row); err != nil {
		return err
	}
	row.Checked, row.Stored = true, row.Members-before
	return checkSetsReplies(row)
}

// checkScards reads every key's SCARD into row.Members and compares each
// with the distinct members sent to it.
func (b *bench) checkScards(ctx context.Context, ctl *redis.Client, st *setsGroupState, row *report.Row) error {
	pipe := ctl.Pipeline()
	cmds := make([]*redis.IntCmd, b.cfg.SetsPosts)
	for p, k := range st.keys(b.cfg.SetsPosts) {
		cmds[p] = pipe.SCard(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("SCARD: %w", err)
	}
	row.Members = 0
	for p, c := range cmds {
		n := c.Val()
		if n != st.want[p] {
			return fmt.Errorf("SCARD %s = %d; %d distinct members were sent to it", st.key(p), n, st.want[p])
		}
		row.Members += n
	}
	return nil
}

// checkSetsReplies fails a SADD cell whose replies or stored cardinality
// do not add up: every reply 1 for new members, 0 for repeats, and the
// cardinality grown by what the replies counted.
func checkSetsReplies(row *report.Row) error {
	want := row.Increments
	if row.Command == report.CommandSAddRepeat {
		want = 0
	}
	switch {
	case row.New != want:
		return fmt.Errorf("the replies counted %d new members of %d SADDs; want %d", row.New, row.Increments, want)
	case row.Stored != row.New:
		return fmt.Errorf("the cardinality grew %d for %d new members", row.Stored, row.New)
	}
	return nil
}

func sum(v []int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}

// setsLoad is one Redis-protocol cell's load from counterbench's own
// clients, each in a closed loop: send a pipeline, read its replies.
type setsLoad struct {
	network, addr     string
	clients, pipeline int
	// duration and requests bound the cell: it ends at whichever comes
	// first; limit bounds what client c sends.
	duration time.Duration
	requests int
	limit    func(c int) int
	// command appends client c's i-th command.
	command func(buf []byte, c, i int) []byte
}

// setsResult is what a cell's clients measured.
type setsResult struct {
	// sent is the commands each client had answered without error.
	sent []int
	// ops counts replies that were not errors, errs error replies and sum
	// adds up the integer replies (SADD's new members).
	ops, errs, sum int64
	firstErr       string
	elapsed        time.Duration
	p50, p99       time.Duration
}

// runSetsLoad runs l and fills row with its rate, latencies and the
// harness's own CPU (the clients'); an error reply fails the cell.
func (b *bench) runSetsLoad(ctx context.Context, l setsLoad, row *report.Row) (setsResult, error) {
	ownAt, ownErr := process.CPUOf(os.Getpid())
	res, err := runSetsLoad(ctx, l)
	if now, err := process.CPUOf(os.Getpid()); err == nil && ownErr == nil {
		row.CPU.Client = report.Share{Time: now.Own - ownAt.Own, Known: true}
	}
	row.Elapsed, row.Increments, row.Errors = res.elapsed, res.ops, res.errs
	if res.elapsed > 0 {
		row.Rate = float64(res.ops) / res.elapsed.Seconds()
	}
	row.P50, row.P99 = res.p50, res.p99
	if err == nil && res.errs > 0 {
		err = fmt.Errorf("%d error replies, the first %q", res.errs, res.firstErr)
	}
	return res, err
}

func runSetsLoad(ctx context.Context, l setsLoad) (setsResult, error) {
	res := setsResult{sent: make([]int, l.clients)}
	var (
		remaining atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		hist      latency.Histogram
		errs      []error
	)
	remaining.Store(int64(l.requests))
	start := time.Now()
	deadline := start.Add(l.duration)
	for c := range l.clients {
		wg.Go(func() {
			w := setsWorker{load: l, id: c, lat: new(latency.Histogram)}
			err := w.run(ctx, &remaining, deadline)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("client %d: %w", c, err))
			}
			res.sent[c] = w.answered
			res.ops += int64(w.answered)
			res.errs += w.errs
			res.sum += w.sum
			if res.firstErr == "" {
				res.firstErr = w.firstErr
			}
			hist.Merge(w.lat)
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.p50, res.p99 = hist.Quantile(0.50), hist.Quantile(0.99)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, errors.Join(errs...)
}

// setsWorker is one client of a setsLoad.
type setsWorker struct {
	load     setsLoad
	id       int
	answered int
	errs     int64
	sum      int64
	firstErr string
	lat      *latency.Histogram
}

func (w *setsWorker) run(ctx context.Context, remaining *atomic.Int64, deadline time.Time) error {
	limit := w.load.limit(w.id)
	if limit <= 0 {
		return nil
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, w.load.network, w.load.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if err := conn.SetDeadline(deadline.Add(setsReplyGrace)); err != nil {
		return err
	}
	rd := bufio.NewReaderSize(conn, 64<<10)
	buf := make([]byte, 0, 64<<10)
	i := 0
	for rounds := 0; rounds < setsMaxRounds && time.Now().Before(deadline) && i < limit; rounds++ {
		n := min(w.load.pipeline, limit-i)
		if left := remaining.Add(-int64(n)); left < 0 {
			n += int(left)
		}
		if n <= 0 {
			return nil
		}
		buf = buf[:0]
		for k := range n {
			buf = w.load.command(buf, w.id, i+k)
		}
		t0 := time.Now()
		if _, err := conn.Write(buf); err != nil {
			return err
		}
		for range n {
			if err := w.reply(rd); err != nil {
				return err
			}
		}
		w.lat.Record(time.Since(t0))
		i += n
	}
	return nil
}

// reply reads one reply: an integer adds to sum, an error counts.
func (w *setsWorker) reply(rd *bufio.Reader) error {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return err
	}
	if len(line) < 3 {
		return fmt.Errorf("short reply %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case ':':
		v, ok := resp.ParseInt(body)
		if !ok {
			return fmt.Errorf("bad integer reply %q", line)
		}
		w.sum += v
	case '-':
		w.errs++
		if w.firstErr == "" {
			w.firstErr = string(body)
		}
		return nil
	default:
		return fmt.Errorf("unexpected reply %q", line)
	}
	w.answered++
	return nil
}

// likesPool is the likes pattern's pool, opened on first use: one
// connection a client, with an application_name of its own.
func (b *bench) likesPool(ctx context.Context) (*pgxpool.Pool, error) {
	if b.setsPool != nil {
		return b.setsPool, nil
	}
	url, err := withParam(b.url, "application_name", setsAppName)
	if err != nil {
		return nil, err
	}
	pool, err := database.Open(url, database.Options{MaxConns: b.cfg.SetsClients})
	if err != nil {
		return nil, err
	}
	b.setsPool = pool
	return pool, nil
}

// likesTables (re)creates the likes pattern's tables for a group: a post
// row for each key, no likes.
func (b *bench) likesTables(ctx context.Context) error {
	_, err := b.pool.Exec(ctx, `DROP TABLE IF EXISTS likes, posts;
CREATE TABLE posts (id bigint PRIMARY KEY, like_count bigint NOT NULL DEFAULT 0);
CREATE TABLE likes (post_id bigint NOT NULL, user_id bigint NOT NULL, PRIMARY KEY (post_id, user_id))`)
	if err == nil {
		_, err = b.pool.Exec(ctx, `INSERT INTO posts (id) SELECT generate_series(0, $1::int - 1)`, b.cfg.SetsPosts)
	}
	if err != nil {
		return fmt.Errorf("create the likes pattern's tables: %w", err)
	}
	return nil
}

// likesCell measures the application's own pattern: each client, in a
// closed loop, likes a post in a transaction of its own, INSERT ... ON
// CONFLICT DO NOTHING into likes and, when it inserted, the post's
// like_count + 1. CPU is PostgreSQL's (the pool's backends, the whole
// server) and counterbench's own (pgx); the checks compare each post's
// like_count and likes rows with the distinct likes sent to it.
func (b *bench) likesCell(ctx context.Context, cmd string, st *setsGroupState, row *report.Row) error {
	pool, err := b.likesPool(ctx)
	if err != nil {
		return err
	}
	var before int64
	if cmd == report.CommandSAddNew {
		if err := b.likesTables(ctx); err != nil {
			return err
		}
	} else {
		before = sum(st.want)
	}
	if err := warmPool(ctx, pool, b.cfg.SetsClients); err != nil {
		return err
	}
	clients := b.cfg.SetsClients
	like := func(ctx context.Context, c, i int) (int64, error) {
		u := st.user(cmd, c, i, clients)
		post := int64(b.setsPost(u))
		var inserted int64
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO likes (post_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, post, u)
			if err != nil || tag.RowsAffected() == 0 {
				return err
			}
			inserted = 1
			_, err = tx.Exec(ctx, `UPDATE posts SET like_count = like_count + 1 WHERE id = $1`, post)
			return err
		})
		return inserted, err
	}
	cpu := startCPU(ctx, 0, &pgCPU{pool: b.pool, app: setsAppName, postmaster: b.postmaster})
	ownAt, ownErr := process.CPUOf(os.Getpid())
	res, err := runLikes(ctx, clients, b.cfg.Duration, b.cfg.SetsRequests, func(c int) int { return st.limit(cmd, c) }, like)
	if now, e := process.CPUOf(os.Getpid()); e == nil && ownErr == nil {
		row.CPU.Client = report.Share{Time: now.Own - ownAt.Own, Known: true}
	}
	cpu.finish(ctx, row)
	row.Elapsed, row.Increments = res.elapsed, res.ops
	if res.elapsed > 0 {
		row.Rate = float64(res.ops) / res.elapsed.Seconds()
	}
	row.P50, row.P99 = res.p50, res.p99
	if err != nil {
		return err
	}
	row.New, row.RowsWritten = res.sum, 2*res.sum
	if cmd == report.CommandSAddNew {
		b.recordSent(st, res.sent)
	}
	rows, err := b.pool.Query(ctx, `SELECT p.id, p.like_count, (SELECT count(*) FROM likes l WHERE l.post_id = p.id) FROM posts p ORDER BY p.id`)
	if err != nil {
		return fmt.Errorf("read the likes: %w", err)
	}
	var total, likes int64
	posts := 0
	for rows.Next() {
		var id, count, n int64
		if err := rows.Scan(&id, &count, &n); err != nil {
			rows.Close()
			return err
		}
		if id < 0 || id >= int64(len(st.want)) || count != n || n != st.want[id] {
			rows.Close()
			return fmt.Errorf("post %d: like_count %d, %d likes rows; %d distinct likes were sent to it", id, count, n, st.want[min(max(id, 0), int64(len(st.want)-1))])
		}
		total, likes = total+count, likes+n
		posts++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the likes: %w", err)
	}
	if posts != b.cfg.SetsPosts {
		return fmt.Errorf("%d posts rows; want %d", posts, b.cfg.SetsPosts)
	}
	row.Checked, row.Stored, row.Members = true, total-before, likes
	return checkSetsReplies(row)
}

// warmPool opens n connections before a cell, so it does not count their
// start-up.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("connect the likes pattern's clients: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

// runLikes runs clients closed loops of like until duration or requests
// (or client c's limit) is reached; like returns 1 when it inserted. Any
// failed like fails the cell: its count would no longer be known.
func runLikes(ctx context.Context, clients int, duration time.Duration, requests int, limit func(int) int,
	like func(ctx context.Context, c, i int) (int64, error)) (setsResult, error) {
	res := setsResult{sent: make([]int, clients)}
	ctx, cancel := context.WithTimeout(ctx, duration+setsReplyGrace)
	defer cancel()
	var (
		remaining atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		hist      latency.Histogram
		errs      []error
	)
	remaining.Store(int64(requests))
	start := time.Now()
	deadline := start.Add(duration)
	for c := range clients {
		wg.Go(func() {
			lat := new(latency.Histogram)
			var n int
			var added int64
			var err error
			for n < limit(c) && n < setsMaxRounds && time.Now().Before(deadline) && remaining.Add(-1) >= 0 {
				t0 := time.Now()
				var v int64
				if v, err = like(ctx, c, n); err != nil {
					err = fmt.Errorf("client %d, like %d: %w", c, n, err)
					break
				}
				lat.Record(time.Since(t0))
				added += v
				n++
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			res.sent[c] = n
			res.ops += int64(n)
			res.sum += added
			hist.Merge(lat)
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.p50, res.p99 = hist.Quantile(0.50), hist.Quantile(0.99)
	return res, errors.Join(errs...)
}
