// Command gnetproto is a throwaway comparison prototype: counterd's accept
// path (journal, pending.Buffer shards, flusher, slots st) served by
// gnet v2 instead of counterd's own epoll loop (internal/server/loop.go),
// so the two can be measured side by side with redis-benchmark
// (measure.sh). It answers INCR, PING, CONFIG (empty, for redis-benchmark)
// and QUIT; anything else is "-ERR unknown command".
//
// The design difference under test: counterd accepts every connection's
// increments of one loop pass with ONE AddGroup (one journal record per
// pass); gnet has no end-of-pass hook, so here each OnTraffic (one
// connection's wake) is one AddGroup and one journal record.
//
// Environment: DATABASE_URL (required), SOCKET (unix socket path,
// required), JOURNAL_DIR (required), LOOPS (default 1),
// FLUSH_INTERVAL (default 100ms), FLUSH_INTERVAL_MAX (default 1s).
// The schema is migrated at start exactly as counterd's serve does
// (internal/migrate), so a fresh database works.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/panjf2000/gnet/v2"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/database"
	"github.com/counterd/counterd/internal/hotness"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/windows"
)

// Defaults copied from internal/config/counterd.go.
const (
	journalMaxBytes  = 1 << 30
	flushMaxKeys     = 10000
	maxPendingKeys   = 1000000
	dbMaxConns       = 8
	statementTimeout = 30 * time.Second
	lockTimeout      = 5 * time.Second
	shutdownTimeout  = 30 * time.Second
	slotsPerKey      = 16
	writers          = 2
	maxKeyLen        = 256
	maxCommandBytes  = resp.MaxCommandBytes
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gnetproto:", err)
		os.Exit(1)
	}
}

func envDur(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	dbURL, sock, jdir := os.Getenv("DATABASE_URL"), os.Getenv("SOCKET"), os.Getenv("JOURNAL_DIR")
	if dbURL == "" || sock == "" || jdir == "" {
		return errors.New("DATABASE_URL, SOCKET and JOURNAL_DIR must be set")
	}
	loops := 1
	if v := os.Getenv("LOOPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 256 {
			return fmt.Errorf("LOOPS: %q is not 1..256", v)
		}
		loops = n
	}
	interval, err := envDur("FLUSH_INTERVAL", 100*time.Millisecond)
	if err != nil {
		return err
	}
	intervalMax, err := envDur("FLUSH_INTERVAL_MAX", time.Second)
	if err != nil {
		return err
	}

	pool, err := database.Open(dbURL, database.Options{
		MaxConns: dbMaxConns, StatementTimeout: statementTimeout, LockTimeout: lockTimeout,
	})
	if err != nil {
		return err
	}
	defer pool.Close()
	// As counterd's serve: the database must answer at start here (the
	// daemon would serve anyway and migrate later; not needed for a bench).
	if err := database.Wait(ctx, pool, 10*time.Second); err != nil {
		return err
	}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	_, err = migrate.Up(mctx, pool, log)
	cancel()
	if err != nil {
		return err
	}

	win, _ := windows.Parse("") // COUNTERD_WINDOWS default: none
	st, err := slots.New(pool, slots.Options{Kinds: catalog.Writers(), Slots: slotsPerKey, Writers: writers, Retention: win.Retention})
	if err != nil {
		return err
	}
	jr, recovered, err := journal.Open(journal.Options{
		Dir: jdir, Fsync: journal.FsyncEverySec, MaxBytes: journalMaxBytes, Logger: log,
	})
	if err != nil {
		return err
	}
	defer jr.Close()
	var rec []pending.Recovered
	for _, seg := range recovered {
		if seg.Records == 0 {
			_ = jr.Remove(seg.Seq)
			continue
		}
		rec = append(rec, pending.Recovered{
			ID:      store.BatchID{Identity: store.Identity{Instance: jr.InstanceID(), Generation: seg.Generation}, Seq: seg.Seq},
			Changes: seg.Changes,
		})
	}
	buf := pending.New(st, pending.Options{
		Journal:        jr,
		Identity:       store.Identity{Instance: jr.InstanceID(), Generation: jr.Generation()},
		Recovered:      rec,
		Interval:       interval,
		IntervalMax:    intervalMax,
		MaxKeys:        flushMaxKeys,
		MaxPendingKeys: maxPendingKeys,
		Shards:         loops,
		Windows:        win,
		Logger:         log,
	})
	// counterd's default server has a hotness classifier and tallies every
	// increment's key for HOT (COUNTERD_SAMPLE_KEYS empty): do the same,
	// so per-INCR CPU is comparable.
	hot := hotness.New(hotness.Options{HotRate: hotness.DefaultHotRate, Target: hotness.DefaultTarget, MaxN: hotness.DefaultMaxN})
	defer hot.Close()

	flushCtx, stopFlusher := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	var flushErr error
	wg.Go(func() { flushErr = buf.Run(flushCtx, pending.DrainAfter(ctx, shutdownTimeout)) })

	h := &handler{buf: buf, hot: hot, loops: loops, byLoop: map[gnet.EventLoop]*loopState{}, booted: make(chan struct{})}
	runErr := make(chan error, 1)
	go func() {
		runErr <- gnet.Run(h, "unix://"+sock,
			gnet.WithMulticore(loops > 1),
			gnet.WithNumEventLoop(loops),
		)
	}()
	select {
	case <-h.booted:
		log.Info("gnetproto ready", "socket", sock, "loops", loops, "flush_interval", interval, "flush_interval_max", intervalMax)
	case err := <-runErr:
		stopFlusher()
		wg.Wait()
		return fmt.Errorf("gnet: %w", err)
	}

	var serveErr error
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		if err := h.eng.Stop(sctx); err != nil {
			log.Warn("gnet stop", "err", err)
		}
		cancel()
		serveErr = <-runErr
	case serveErr = <-runErr:
	}
	log.Info("stopped accepting; flushing", "pending_keys", buf.PendingKeys(), "queued_rounds", buf.QueuedRounds())
	stopFlusher()
	wg.Wait()
	if flushErr != nil {
		return fmt.Errorf("final flush: %w (left in the journal)", flushErr)
	}
	h.mu.Lock()
	log.Info("flushed everything; bye", "loops_seen", len(h.byLoop))
	h.mu.Unlock()
	return serveErr
}

// loopState is one gnet event loop's shard and scratch. Only that loop's
// goroutine touches it (OnTraffic runs on the connection's loop).
type loopState struct {
	idx   int
	shard pending.Shard
	items []change.Change
	errs  []error
	ops   []op
	out   []byte
}

// op is one parsed command's reply: an increment's index into items, or a
// fixed reply.
type op struct {
	item  int // -1: reply instead
	reply []byte
}

type handler struct {
	gnet.BuiltinEventEngine
	buf    *pending.Buffer
	hot    *hotness.Classifier
	loops  int
	eng    gnet.Engine
	booted chan struct{}

	mu     sync.Mutex
	byLoop map[gnet.EventLoop]*loopState
}

func (h *handler) OnBoot(eng gnet.Engine) gnet.Action {
	h.eng = eng
	close(h.booted)
	return gnet.None
}

// OnOpen maps the connection's event loop to a shard: the first loop seen
// gets buf.Shard(0), the next buf.Shard(1)...; gnet does not export the
// loop's index, but c.EventLoop() is the same value for every connection
// of one loop, so this is one shard per loop, as counterd's loops have.
func (h *handler) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	el := c.EventLoop()
	h.mu.Lock()
	ls := h.byLoop[el]
	if ls == nil {
		ls = &loopState{idx: len(h.byLoop)}
		ls.shard = h.buf.Shard(ls.idx)
		h.byLoop[el] = ls
	}
	h.mu.Unlock()
	c.SetContext(ls)
	return nil, gnet.None
}

var (
	replyPong    = []byte("+PONG\r\n")
	replyOK      = []byte("+OK\r\n")
	replyUnknown = []byte("-ERR unknown command\r\n")
	replyArity   = []byte("-ERR wrong number of arguments for 'incr' command\r\n")
)

// OnTraffic parses every complete command buffered, accepts the
// connection's increments with one AddGroup, consumes what it parsed and
// writes the replies (journal, then reply).
func (h *handler) OnTraffic(c gnet.Conn) gnet.Action {
	ls := c.Context().(*loopState)
	data, _ := c.Peek(-1) // everything buffered; keys alias it until AddGroup copies them
	items, ops := ls.items[:0], ls.ops[:0]
	consumed := 0
	var protoErr error
	quit := false
	var args [][]byte
	for consumed < len(data) && !quit {
		var n int
		var err error
		args, n, err = parseCommand(data[consumed:], args[:0])
		if err != nil {
			protoErr = err
			break
		}
		if n == 0 {
			break // incomplete: leave it buffered
		}
		consumed += n
		if len(args) == 0 {
			continue
		}
		name := args[0]
		switch {
		case is(name, "INCR"):
			if len(args) != 2 {
				ops = append(ops, op{item: -1, reply: replyArity})
				continue
			}
			if err := checkKey(args[1]); err != nil {
				ops = append(ops, op{item: -1, reply: []byte("-" + err.Error() + "\r\n")})
				continue
			}
			h.hot.Tally(args[1])
			key := args[1]
			ops = append(ops, op{item: len(items)})
			items = append(items, change.Change{Key: unsafe.String(unsafe.SliceData(key), len(key)), Kind: change.Total, Delta: 1})
		case is(name, "PING") && len(args) == 1:
			ops = append(ops, op{item: -1, reply: replyPong})
		case is(name, "QUIT"):
			ops = append(ops, op{item: -1, reply: replyOK})
			quit = true
		case is(name, "CONFIG"):
			// counterd answers CONFIG GET with an empty value per name;
			// redis-benchmark asks for save and appendonly at start.
			var r []byte
			if len(args) >= 3 && is(args[1], "GET") {
				r = resp.AppendArrayHeader(nil, 2*(len(args)-2))
				for _, p := range args[2:] {
					r = resp.AppendBulk(r, p)
					r = resp.AppendBulkString(r, "")
				}
			} else {
				r = replyUnknown
			}
			ops = append(ops, op{item: -1, reply: r})
		default:
			ops = append(ops, op{item: -1, reply: replyUnknown})
		}
	}

	var gerr error
	if len(items) > 0 {
		if cap(ls.errs) < len(items) {
			ls.errs = make([]error, len(items))
		}
		errs := ls.errs[:len(items)]
		_, gerr = ls.shard.AddGroup(items, errs)
		ls.errs = errs
	}
	out := ls.out[:0]
	for _, o := range ops {
		switch {
		case o.item < 0:
			out = append(out, o.reply...)
		case gerr != nil:
			out = resp.AppendError(out, groupError(gerr))
		case ls.errs[o.item] != nil:
			out = resp.AppendError(out, itemError(ls.errs[o.item]))
		default:
			out = resp.AppendInt(out, items[o.item].Delta)
		}
	}
	if protoErr != nil {
		out = resp.AppendError(out, "ERR Protocol error: "+protoErr.Error())
	}
	clear(items) // drop references to gnet's buffer before consuming it
	if len(items) > 0 {
		clear(ls.errs[:len(items)])
	}
	ls.items, ls.ops = items[:0], ops[:0]
	if consumed > 0 {
		_, _ = c.Discard(consumed)
	}
	if len(out) > 0 {
		if _, err := c.Write(out); err != nil {
			return gnet.Close
		}
	}
	if cap(out) <= 64<<10 {
		ls.out = out[:0]
	} else {
		ls.out = nil
	}
	if protoErr != nil || quit {
		return gnet.Close
	}
	if consumed == 0 && c.InboundBuffered() > maxCommandBytes {
		return gnet.Close // one command larger than counterd allows
	}
	return gnet.None
}

// groupError and itemError answer refusals with a plain error: the
// prototype measures the accept path, not counterd's error wording
// (internal/server/group.go).
func groupError(err error) string { return "ERR " + err.Error() }

func itemError(err error) string {
	if errors.Is(err, pending.ErrBackoff) {
		return "BUSY " + err.Error()
	}
	return groupError(err)
}

func is(name []byte, cmd string) bool {
	return len(name) == len(cmd) && bytes.EqualFold(name, []byte(cmd))
}

// checkKey is a copy of internal/server's (unexported) check, ASCII fast
// path included; non-ASCII keys are only checked for valid UTF-8 here.
func checkKey(key []byte) error {
	switch {
	case len(key) == 0:
		return errors.New("ERR invalid key: empty")
	case len(key) > maxKeyLen:
		return errors.New("ERR invalid key: longer than 256 bytes")
	}
	for _, c := range key {
		if c <= ' ' || c == 0x7f {
			return errors.New("ERR invalid key: contains whitespace or a control character")
		}
	}
	return nil
}

var errIncomplete = errors.New("incomplete")

// parseCommand parses one command at the start of b: a RESP multibulk
// array of bulk strings, or an inline line. It returns the arguments
// (aliasing b), the bytes consumed, 0 if the command is not complete yet,
// or a protocol error.
func parseCommand(b []byte, args [][]byte) ([][]byte, int, error) {
	if len(b) == 0 {
		return args, 0, nil
	}
	if b[0] != '*' {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(b) > 64<<10 {
				return nil, 0, errors.New("too big inline request")
			}
			return args, 0, nil
		}
		line := b[:i]
		line = bytes.TrimSuffix(line, []byte("\r"))
		for _, f := range bytes.Fields(line) {
			args = append(args, f)
		}
		return args, i + 1, nil
	}
	n, p, err := parseLen(b, 1)
	if err == errIncomplete {
		return args, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if n > 1<<16 {
		return nil, 0, errors.New("invalid multibulk length")
	}
	for range n {
		if p >= len(b) {
			return args, 0, nil
		}
		if b[p] != '$' {
			return nil, 0, fmt.Errorf("expected '$', got '%c'", b[p])
		}
		l, q, err := parseLen(b, p+1)
		if err == errIncomplete {
			return args, 0, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if l < 0 || l > resp.MaxBulkLen {
			return nil, 0, errors.New("invalid bulk length")
		}
		if q+l+2 > len(b) {
			return args, 0, nil
		}
		if b[q+l] != '\r' || b[q+l+1] != '\n' {
			return nil, 0, errors.New("bulk not followed by CRLF")
		}
		args = append(args, b[q:q+l])
		p = q + l + 2
	}
	return args, p, nil
}

// parseLen parses a decimal terminated by CRLF at b[p:], returning it and
// the offset after the CRLF.
func parseLen(b []byte, p int) (int, int, error) {
	i := bytes.IndexByte(b[p:], '\n')
	if i < 0 {
		if len(b)-p > 32 {
			return 0, 0, errors.New("invalid length")
		}
		return 0, 0, errIncomplete
	}
	end := p + i
	if end == p || b[end-1] != '\r' {
		return 0, 0, errors.New("length not followed by CRLF")
	}
	n, ok := resp.ParseInt(b[p : end-1])
	if !ok || n < -1 || n > maxCommandBytes {
		return 0, 0, errors.New("invalid length")
	}
	return int(n), end + 1, nil
}
