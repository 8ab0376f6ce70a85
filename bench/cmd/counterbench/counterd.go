package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/loadgen"
)

// counterdServer is the counterd process the run started, with a control
// connection for FLUSH.
type counterdServer struct {
	proc   *process.Process
	socket string
	// app is the application_name of its database connections.
	app     string
	metrics string // host:port of /metrics, "" when counterd logged none
	ctl     *redis.Client
	// log receives all of counterd's output; closed once it stopped
	// when ownLog is set (the budget section's daemons share one).
	log    *os.File
	ownLog bool
	// total sums the counters it writes; nil: counter_totals in the
	// run's schema (b.counterdTotal).
	total func(context.Context) (int64, error)
}

// counterdOwn are the settings the run decides; other COUNTERD_*
// variables in the environment reach counterd unchanged.
var counterdOwn = []string{"DATABASE_URL", "COUNTERD_SOCKET", "COUNTERD_JOURNAL_DIR", "COUNTERD_METRICS_ADDR", "COUNTERD_LOG_FORMAT", "COUNTERD_SAMPLE_KEYS"}

// startCounterd starts counterd on the first call and returns it after.
func (b *bench) startCounterd(ctx context.Context) (*counterdServer, error) {
	if b.counterd != nil {
		return b.counterd, nil
	}
	log, err := b.createLog(report.CounterdLogFile)
	if err != nil {
		return nil, err
	}
	srv, err := b.spawnCounterd(ctx, filepath.Join(b.tmp, "counterd"), log)
	if err != nil {
		log.Close()
		return nil, err
	}
	srv.ownLog = true
	b.counterd = srv
	return srv, nil
}

// spawnCounterd starts a counterd whose socket and journal are in dir,
// printing into log, on the run's database; extra settings come last and
// win. Several may run at once.
func (b *bench) spawnCounterd(ctx context.Context, dir string, log *os.File, extra ...string) (*counterdServer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	socket := filepath.Join(dir, "c.sock")
	// Its own application_name finds its backends in pg_stat_activity.
	app := "counterbench-" + filepath.Base(dir)
	url, err := withParam(b.url, "application_name", app)
	if err != nil {
		return nil, err
	}
	env := []string{
		"DATABASE_URL=" + url,
		"COUNTERD_SOCKET=" + socket,
		"COUNTERD_JOURNAL_DIR=" + filepath.Join(dir, "journal"),
		"COUNTERD_METRICS_ADDR=127.0.0.1:0",
		"COUNTERD_LOG_FORMAT=text",
		// The run checks exact totals: never sample, whatever the
		// environment says.
		"COUNTERD_SAMPLE_KEYS=",
	}
	for _, kv := range b.environ {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || (strings.HasPrefix(k, "COUNTERD_") && !slices.Contains(counterdOwn, k)) {
			env = append(env, kv) // later entries win
		}
	}
	env = append(env, extra...)
	b.progress.note("starting counterd (" + b.cfg.Counterd + ")")
	proc, err := process.Start(ctx, process.Spec{
		Name: "counterd", Path: b.cfg.Counterd, Env: env, Timeout: time.Minute, Log: log,
		Ready: func(line string) bool { return strings.Contains(line, "counterd ready") },
	})
	if err != nil {
		return nil, err
	}
	metrics, _ := proc.Find(func(line string) (string, bool) {
		if !strings.Contains(line, "serving metrics") {
			return "", false
		}
		_, rest, ok := strings.Cut(line, "addr=")
		if !ok {
			return "", false
		}
		return strings.Trim(strings.Fields(rest)[0], `"`), true
	})
	b.progress.note(fmt.Sprintf("counterd ready (pid %d)", proc.Pid()))
	return &counterdServer{proc: proc, socket: socket, app: app, metrics: metrics, ctl: control(socket), log: log}, nil
}

// control is a one-connection client for FLUSH, FLUSHALL and the like.
func control(socket string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Network: "unix", Addr: socket, Protocol: 2, DisableIdentity: true,
		MaxRetries: -1, PoolSize: 1, DialTimeout: 5 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
	})
}

// flushTries bounds the FLUSHes flush sends. FLUSH gives up after
// COUNTERD_FLUSH_TIMEOUT; a large backlog may need a few.
const flushTries = 10

// flush returns once counterd has committed everything it acknowledged.
// Its error says how long it waited in all, so a stalled drain shows.
func (c *counterdServer) flush(ctx context.Context) error {
	start := time.Now()
	var err error
	tries := 0
	for tries < flushTries {
		tries++
		err = c.ctl.Do(ctx, "FLUSH").Err()
		var rerr redis.Error
		if err == nil || !errors.As(err, &rerr) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("FLUSH: gave up after waiting %v in all (%d tries): %w",
			time.Since(start).Round(time.Millisecond), tries, err)
	}
	return nil
}

// scrape reads counterd's unlabelled metrics; nil when counterd logged no
// metrics listener.
func (c *counterdServer) scrape(ctx context.Context) (map[string]float64, error) {
	if c.metrics == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape counterd metrics: %w", err)
	}
	defer resp.Body.Close()
	m, err := parseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape counterd metrics: %w", err)
	}
	return m, nil
}

// slotRowsOf reads, from a scrape, how many slot rows counterd's committed
// rounds wrote; ok is false when counterd does not say (no metrics
// listener, or no round committed yet).
func slotRowsOf(m map[string]float64) (float64, bool) {
	if v, ok := m["counterd_flush_keys_total"]; ok {
		return v, true
	}
	// Before counterd counted slot rows itself, the batch-size
	// histogram's sum was the same number; the histogram appears with
	// its first round.
	v, ok := m["counterd_flush_batch_keys_sum"]
	return v, ok
}

// parseMetrics reads the unlabelled samples of Prometheus text format.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.Contains(line, "{") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			m[f[0]] = v
		}
	}
	return m, sc.Err()
}

func (c *counterdServer) stop() error {
	c.ctl.Close()
	err := c.proc.Stop(time.Minute)
	if c.ownLog {
		err = errors.Join(err, c.log.Close())
	}
	return err
}

// counterdTotal sums the public read view over every key of the run.
func (b *bench) counterdTotal(ctx context.Context) (int64, error) {
	var n int64
	if err := b.pool.QueryRow(ctx, `SELECT coalesce(sum(total), 0)::bigint FROM counter_totals`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sum counter_totals: %w", err)
	}
	return n, nil
}

// counterdMeasure runs load against counterd into row, then FLUSHes and
// compares the stored total with the increments acknowledged.
func (b *bench) counterdMeasure(ctx context.Context, row *report.Row, load loadgen.Config) error {
	srv, err := b.startCounterd(ctx)
	if err != nil {
		return err
	}
	load.Network, load.Addr = "unix", srv.socket
	_, err = b.counterdAround(ctx, srv, row, func() error {
		res, err := loadgen.Run(ctx, load)
		if err != nil {
			return err
		}
		fillFromLoad(row, res)
		return nil
	})
	return err
}

// counterdAround runs measure between two readings of counterd's total and
// metrics, with a FLUSH before the second, timed as row.Drain, and
// between two readings of the CPU counterd and PostgreSQL spent, the
// second after the FLUSH. It returns the metrics read after the FLUSH
// (nil when counterd serves none), which include the drain's rounds.
func (b *bench) counterdAround(ctx context.Context, srv *counterdServer, row *report.Row, measure func() error) (map[string]float64, error) {
	m, err := srv.scrape(ctx)
	if err != nil {
		return nil, err
	}
	// Before the first committed round there is nothing to count yet.
	rowsBefore, _ := slotRowsOf(m)
	total := b.counterdTotal
	if srv.total != nil {
		total = srv.total
	}
	before, err := total(ctx)
	if err != nil {
		return nil, err
	}
	cpu := startCPU(ctx, srv.proc.Pid(), &pgCPU{pool: b.pool, app: srv.app, postmaster: b.postmaster})
	if err := measure(); err != nil {
		cpu.finish(ctx, row)
		return nil, err
	}
	drainStart := time.Now()
	if err := srv.flush(ctx); err != nil {
		if ctx.Err() == nil {
			b.progress.note("counterd's FLUSH failed; what counterd logged last may say why")
			b.showLog(srv.log.Name(), logTail)
		}
		cpu.finish(ctx, row)
		return nil, err
	}
	row.Drain = time.Since(drainStart)
	cpu.finish(ctx, row)
	after, err := total(ctx)
	if err != nil {
		return nil, err
	}
	if m, err = srv.scrape(ctx); err != nil {
		return nil, err
	}
	rowsAfter, ok := slotRowsOf(m)
	row.Checked, row.Stored = true, after-before
	row.RowsWritten = -1
	if ok {
		row.RowsWritten = int64(rowsAfter - rowsBefore)
	} else if row.Stored != 0 {
		row.Note = "counterd reported no slot-row count"
	}
	return m, nil
}

func fillFromLoad(row *report.Row, res loadgen.Result) {
	row.Elapsed, row.Increments, row.Errors = res.Elapsed, res.Ops, res.Errors
	row.Rate, row.P50, row.P99, row.P999, row.Max = res.Rate(), res.P50, res.P99, res.P999, res.Max
	for _, s := range res.Seconds {
		row.Seconds = append(row.Seconds, report.Second{Replies: s.Ops, Max: s.Max})
	}
}
