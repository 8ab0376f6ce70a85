package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/proctest"
	"github.com/counterd/counterd/internal/slots"
)

var binary string

func TestMain(m *testing.M) { goleak.VerifyTestMain(proctest.Built(m, "rollup", ".", &binary)) }

func sum(t *testing.T, db *pgtest.DB, table, col string) (n int64) {
	t.Helper()
	q := fmt.Sprintf(`SELECT coalesce(sum(%s), 0)::bigint FROM %s`, col, table)
	if err := db.Pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// report is what rollup once prints; the group is the slot rows left.
var report = regexp.MustCompile(`^folded \d+ slot rows into \d+ keys in \d+ chunks in \S+; (\d+) slot rows left\n$`)

// rollup once, run again and again while writers write, moves every
// increment into counters exactly once.
func TestOnceRacingWriters(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	store, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stop := make(chan struct{})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		written int64
		werr    error
	)
	for w := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				batch := []change.Change{{Kind: change.Total, Key: fmt.Sprintf("post:%d", i%5), Delta: 2}, {Kind: change.Total, Key: fmt.Sprintf("post:x%d", w), Delta: 1}}
				_, err := store.Apply(ctx, batch)
				mu.Lock()
				if err != nil {
					werr = errors.Join(werr, err)
				} else {
					written += 3
				}
				mu.Unlock()
			}
		})
	}
	// Stop the writers however the test ends, before its pool closes.
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(halt)
	env := []string{"DATABASE_URL=" + db.URL, "ROLLUP_CHUNK=3"}
	const passes = 5
	for range passes {
		cmd := exec.Command(binary, "once")
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("rollup once: %v", err)
		}
		if !report.Match(out) {
			t.Fatalf("rollup once printed %q; want it to match %s", out, report)
		}
	}
	halt()
	if werr != nil {
		t.Fatal(werr)
	}
	before := sum(t, db, "counter_totals", "total")
	cmd := exec.Command(binary, "once")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("final rollup: %v\n%s", err, out)
	}
	if m := report.FindSubmatch(out); m == nil || string(m[1]) != "0" {
		t.Fatalf("final rollup printed %q; want 0 slot rows left", out)
	}
	if got := sum(t, db, "counter_slots", "count"); got != 0 {
		t.Fatalf("slot rows left after a quiet pass: sum %d; want 0", got)
	}
	base := sum(t, db, "counters", "total")
	if base != written || before != written {
		t.Fatalf("totals: counters %d, counter_totals before the last pass %d; want both %d written", base, before, written)
	}
	t.Logf("%d passes raced %d increments", passes, written)
}

// The scheduler runs passes on its schedule and stops cleanly on SIGTERM.
// Its output is log records only: the "folded ..." report is rollup
// once's (before, every pass printed it on stdout beside the JSON log).
func TestScheduleRunsAndStops(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	store, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Apply(context.Background(), []change.Change{{Kind: change.Total, Key: "post:1", Delta: 5}}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary)
	cmd.Env = []string{"DATABASE_URL=" + db.URL, "ROLLUP_SCHEDULE=@every 1s", "ROLLUP_LOG_LEVEL=debug", "ROLLUP_LOG_FORMAT=json"}
	var stdout strings.Builder // written by exec's copier until Wait returns
	cmd.Stdout = &stdout
	// If the test binary dies, the scheduler dies with it.
	cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
	// An io.Pipe, not StderrPipe: the scanner may still read while Wait
	// runs.
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		pw.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited // reaped, whichever way the test ended
	})
	// passed closes after the pass that folds the row and then one that
	// finds nothing.
	passed := make(chan struct{})
	var log strings.Builder // written by the scanner until exited
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		folded, idle := false, false
		for sc.Scan() {
			line := sc.Text()
			log.WriteString(line + "\n")
			switch {
			case !strings.Contains(line, `"msg":"rollup pass"`):
			case strings.Contains(line, `"slot_rows":1,`):
				folded = true
			case folded && strings.Contains(line, `"slot_rows":0,`) && !idle:
				idle = true
				close(passed)
			}
		}
	}()
	select {
	case <-passed:
	case <-time.After(30 * time.Second):
		t.Fatal("no rollup pass folding the row, then an idle one, within 30s on a 1s schedule")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	<-scanned
	if waitErr != nil {
		t.Fatalf("exit after SIGTERM: %v; want 0", waitErr)
	}
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("a log line that is not JSON: %s", line)
		}
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("an error logged around a clean SIGTERM: %s", line)
		}
		if strings.Contains(line, `"level":"INFO","msg":"rollup pass"`) && strings.Contains(line, `"slot_rows":0,`) {
			t.Errorf("a pass with nothing to do logged at info: %s", line)
		}
	}
	if stdout.Len() > 0 {
		t.Errorf("the scheduler wrote to stdout: %q; want log records only", stdout.String())
	}
	if got := sum(t, db, "counters", "total"); got != 5 {
		t.Fatalf("counters: got %d; want 5", got)
	}
}

// rollup once against a table another connection holds locked fails with
// the lock timeout instead of waiting for ROLLUP_TIMEOUT.
func TestOnceLockedTableFailsFast(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `LOCK TABLE counter_slots IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, binary, "once")
	cmd.Env = []string{"DATABASE_URL=" + db.URL, "ROLLUP_LOCK_TIMEOUT=200ms"}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "lock timeout") {
		t.Fatalf("rollup once on a locked table: %v after %v, %q; want exit 1 naming the lock timeout", err, took, out)
	}
	if took > 20*time.Second {
		t.Fatalf("rollup once took %v to fail; want about the 200ms lock timeout", took)
	}
}

// A DATABASE_URL that does not parse is a bad setting: exit 2, as any
// other, in one line, without the password. Before, it exited 1; a URL
// of another scheme (postgress://) or keyword/value settings naming no
// server were read as settings and the rollup ran against the local
// socket.
func TestBadDatabaseURLExitsTwo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ url, want string }{
		{"postgres://secret:hunter2@nowhere:port/x", "rollup: DATABASE_URL is not a valid PostgreSQL URL or DSN\n"},
		{"postgress://secret:hunter2@nowhere/x?sslmode=disable", "rollup: DATABASE_URL is not a valid PostgreSQL URL or DSN: scheme postgress:// is neither postgres:// nor postgresql://\n"},
		{"sslmode=disable password=hunter2", "rollup: DATABASE_URL is not a valid PostgreSQL URL or DSN: a keyword/value DSN must name host or dbname\n"},
	} {
		for _, args := range [][]string{{"once"}, nil} {
			cmd := exec.Command(binary, args...)
			cmd.Env = []string{"DATABASE_URL=" + c.url}
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || string(out) != c.want {
				t.Errorf("rollup %v with DATABASE_URL %s: %v, %q; want exit 2 and %q", args, c.url, err, out, c.want)
			}
		}
	}
}

func TestBadScheduleExitsTwo(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary)
	cmd.Env = []string{"DATABASE_URL=postgres://x/y", "ROLLUP_SCHEDULE=whenever"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "ROLLUP_SCHEDULE") {
		t.Fatalf("got %v, %q; want exit 2 naming ROLLUP_SCHEDULE", err, out)
	}
}

// --version prints one line naming the program and needs no settings.
func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		t.Fatalf("rollup --version: %v", err)
	}
	if s := string(out); !strings.HasPrefix(s, "rollup ") || strings.Count(s, "\n") != 1 {
		t.Fatalf("rollup --version: got %q; want one line starting with rollup", s)
	}
}

// SIGINT while the scheduler waits for the database at start (Ctrl-C in
// make run right after the banner) is a clean stop: exit 0, at once. The
// test's "server" accepts the connection and never answers, so the
// scheduler is known to be waiting when the signal comes.
func TestStopWhileWaitingForDatabase(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "rollup")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL.5432"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(binary)
	cmd.Env = []string{"DATABASE_URL=postgres://postgres@/counterd?host=" + dir + "&port=5432&sslmode=disable", "ROLLUP_SCHEDULE=@every 1s"}
	cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	c, err := ln.Accept() // rollup is in its wait for the database
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit after SIGINT while waiting for the database: %v; want 0\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		exited <- <-exited // stderr is complete once it exited
		t.Fatalf("still running 30s after SIGINT\n%s", stderr.String())
	}
}

// A database that refuses the connection for good (here: no such
// database) is a bad DATABASE_URL: exit 2 naming it and the server's
// reason, as counterd does, without the password. Before, exit 1.
func TestRefusingDatabaseExitsTwo(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/no_such_database_x"
	u.User = url.UserPassword(u.User.Username(), "hunter2")
	for _, args := range [][]string{{"once"}, nil} {
		cmd := exec.Command(binary, args...)
		cmd.Env = []string{"DATABASE_URL=" + u.String()}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "rollup: DATABASE_URL: ") ||
			!strings.Contains(string(out), "does not exist") || strings.Contains(string(out), "hunter2") {
			t.Errorf("rollup %v with no such database: %v, %q; want exit 2 naming DATABASE_URL and the reason, no password", args, err, out)
		}
	}
}

// -h after the verb prints usage and exits 0, as before it. Before,
// rollup once --help was refused as unknown arguments (exit 2).
func TestVerbHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"once", "--help"}, {"once", "-h"}, {"schedule", "-h"}} {
		out, err := exec.Command(binary, args...).Output()
		if err != nil || !strings.HasPrefix(string(out), "usage: rollup [once]") || !strings.Contains(string(out), "ROLLUP_TARGETS") {
			t.Errorf("rollup %v: %v, %q; want exit 0 and the usage with the settings", args, err, out)
		}
	}
	// Anything else after the verb is still refused.
	cmd := exec.Command(binary, "once", "--now")
	cmd.Env = []string{"DATABASE_URL=postgres://x/y"}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "unknown arguments") {
		t.Errorf("rollup once --now: %v, %q; want refused as unknown arguments", err, out)
	}
}

// The scheduler counts its passes by result in
// counterd_rollup_passes_total: one that folds is ok, one that fails (a
// table locked past ROLLUP_LOCK_TIMEOUT) is error. Before, nothing but
// the log told a failing rollup from a working one.
func TestSchedulePassesCounted(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(binary)
	cmd.Env = []string{"DATABASE_URL=" + db.URL, "ROLLUP_SCHEDULE=@every 1s", "ROLLUP_LOG_LEVEL=debug",
		"ROLLUP_METRICS_ADDR=127.0.0.1:0", "ROLLUP_LOCK_TIMEOUT=200ms"}
	cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); pw.Close(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	addr := make(chan string, 1)
	passed, failed := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		pass, fail := sync.OnceFunc(func() { close(passed) }), sync.OnceFunc(func() { close(failed) })
		for sc.Scan() {
			line := sc.Text()
			if _, a, ok := strings.Cut(line, `msg="metrics listening" addr=`); ok {
				addr <- a
			}
			if strings.Contains(line, `msg="rollup pass" `) {
				pass()
			}
			if strings.Contains(line, `msg="rollup pass failed"`) {
				fail()
			}
		}
	}()
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("no %s before the test's deadline", what)
		}
	}
	var metricsAddr string
	select {
	case metricsAddr = <-addr:
	case <-ctx.Done():
		t.Fatal("no metrics address logged")
	}
	passes := func(result string) int {
		t.Helper()
		body := get(t, "http://"+metricsAddr+"/metrics")
		re := regexp.MustCompile(`(?m)^counterd_rollup_passes_total\{result="` + result + `"\} (\d+)$`)
		m := re.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics has no counterd_rollup_passes_total{result=%q}:\n%s", result, body)
		}
		var n int
		fmt.Sscan(m[1], &n)
		return n
	}
	wait(passed, "pass")
	if ok, bad := passes("ok"), passes("error"); ok < 1 || bad != 0 {
		t.Fatalf("after a pass: ok %d, error %d; want ok at least 1, error 0", ok, bad)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `LOCK TABLE counter_slots IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	wait(failed, "failed pass")
	if bad := passes("error"); bad < 1 {
		t.Fatalf("after a failed pass: error %d; want at least 1", bad)
	}
}
