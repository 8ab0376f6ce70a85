package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

func client(t testing.TB, socket string) *redis.Client {
	t.Helper()
	c := logTo(t, redis.NewClient(&redis.Options{Network: "unix", Addr: socket, Protocol: 2, DisableIdentity: true}))
	t.Cleanup(func() { c.Close() })
	return c
}

func TestGoRedisClient(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h") // only FLUSH writes
	c := client(t, d.socket)
	ctx := context.Background()

	mustInt := func(cmd *redis.IntCmd, want int64) {
		t.Helper()
		got, err := cmd.Result()
		if err != nil || got != want {
			t.Fatalf("%v: got %d, %v; want %d", cmd.Args(), got, err, want)
		}
	}
	mustInt(c.Incr(ctx, "post:42"), 1)
	mustInt(c.IncrBy(ctx, "post:42", 10), 10)
	mustInt(c.Decr(ctx, "post:42"), -1)
	mustInt(c.DecrBy(ctx, "post:42", 3), -3)
	mustInt(c.IncrBy(ctx, "post:43", -5), -5)

	// GET sees what is accepted but not yet written.
	if got, err := c.Get(ctx, "post:42").Int64(); err != nil || got != 7 {
		t.Fatalf("GET before FLUSH: got %d, %v; want 7", got, err)
	}
	if got := total(t, db, "post:42"); got != 0 {
		t.Fatalf("counter_totals before FLUSH: got %d; want 0 (flush interval is 1h)", got)
	}
	if err := c.Do(ctx, "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}
	if got := total(t, db, "post:42"); got != 7 {
		t.Fatalf("counter_totals after FLUSH: got %d; want 7", got)
	}
	vals, err := c.MGet(ctx, "post:42", "post:43", "never:seen").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(vals); got != "[7 -5 0]" {
		t.Fatalf("MGET: got %s; want [7 -5 0]", got)
	}

	// Errors are replies; the connection stays usable after each.
	errCases := []struct {
		args []any
		want string
	}{
		{[]any{"incr", "bad key"}, "invalid key"},
		{[]any{"incr", strings.Repeat("k", 257)}, "longer than 256"},
		{[]any{"incr", "bad\x00key"}, "control character"},
		{[]any{"incr", "bad\xffkey"}, "UTF-8"},
		{[]any{"incrby", "post:42", "1.5"}, "not an integer"},
		{[]any{"incrby", "post:42", "99999999999999999999"}, "not an integer"},
		{[]any{"incrby", "post:42", "9223372036854775807"}, ""},
		{[]any{"incrby", "post:42", "1"}, "overflow"},
		{[]any{"decrby", "post:42", "-9223372036854775808"}, "overflow"},
		{[]any{"incr"}, "wrong number of arguments"},
		{[]any{"frobnicate", "x"}, "unknown command 'frobnicate'"},
	}
	for _, tc := range errCases {
		err := c.Do(ctx, tc.args...).Err()
		if tc.want == "" {
			if err != nil {
				t.Fatalf("%v: %v; want success", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v; want an error containing %q", tc.args, err, tc.want)
		}
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after errors: %v", err)
	}
	// Undo the big INCRBY so the pending delta can be written.
	mustInt(c.DecrBy(ctx, "post:42", 9223372036854775807), -9223372036854775807)

	// A pipeline of many increments is acknowledged in order.
	pipe := c.Pipeline()
	for range 1000 {
		pipe.Incr(ctx, "post:pipe")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}
	if got := total(t, db, "post:pipe"); got != 1000 {
		t.Fatalf("post:pipe: got %d; want 1000", got)
	}
	if got := total(t, db, "post:42"); got != 7 {
		t.Fatalf("post:42 after rejected increments: got %d; want 7", got)
	}
}

func TestInlineProtocol(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	conn, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	// What `printf '...' | nc -U SOCKET` sends: several commands at once.
	in := "incr post:1\r\nincrby post:1 41\nGET post:1\r\nping\r\n\r\nnope\r\nincrby post:1 x\r\nflush\r\nquit\r\n"
	if _, err := conn.Write([]byte(in)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		":1", ":41", "$2", "42", "+PONG",
		"-ERR unknown command 'nope', with args beginning with:",
		"-ERR value is not an integer or out of range",
		"+OK", "+OK",
	}
	sc := bufio.NewScanner(conn)
	for i, w := range want {
		if !sc.Scan() {
			t.Fatalf("reply %d: connection ended (%v); want %q", i, sc.Err(), w)
		}
		if got := sc.Text(); got != w {
			t.Fatalf("reply %d: got %q; want %q", i, got, w)
		}
	}
	if sc.Scan() {
		t.Fatalf("after QUIT: got %q; want the connection closed", sc.Text())
	}
	if got := total(t, db, "post:1"); got != 42 {
		t.Fatalf("post:1: got %d; want 42", got)
	}
}

func TestProtocolErrorClosesConnection(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	conn, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte("*1\r\n$x\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "-ERR Protocol error") {
		t.Fatalf("got %q, %v; want -ERR Protocol error", line, err)
	}
	// The daemon itself stays up.
	if err := client(t, d.socket).Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestSocketPermissions(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	fi, err := os.Stat(d.socket)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("socket mode: got %o; want 600", got)
	}
}

// SIGTERM stops accepting, writes everything acknowledged, and exits 0.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	ctx := context.Background()
	const clients, per = 8, 500
	var wg sync.WaitGroup
	acked := make([]int64, clients)
	for i := range clients {
		wg.Go(func() {
			c := client(t, d.socket)
			for range per {
				if err := c.Incr(ctx, fmt.Sprintf("post:%d", i%3)).Err(); err != nil {
					return
				}
				acked[i]++
			}
		})
	}
	wg.Wait()
	d.stop()
	want := map[string]int64{}
	for i, n := range acked {
		want[fmt.Sprintf("post:%d", i%3)] += n
	}
	for k, w := range want {
		if w == 0 {
			t.Fatalf("%s: no increment acknowledged", k)
		}
		if got := total(t, db, k); got != w {
			t.Errorf("%s: got %d; want %d acknowledged", k, got, w)
		}
	}
	if _, err := os.Stat(d.socket); !os.IsNotExist(err) {
		t.Errorf("socket left behind after exit: %v", err)
	}
}

// A bad setting, DATABASE_URL included, exits 2 with one line naming the
// variable (and for a value that does not parse, the value and what the
// variable takes, no Go type). Before, a DATABASE_URL that does not parse
// exited 1 and COUNTERD_FSYNC=sometimes said "invalid journal.FsyncMode".
// A URL of another scheme is refused the same way.
func TestBadConfigExitsTwo(t *testing.T) {
	t.Parallel()
	f := func(env []string, want string, args ...string) {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Fatalf("env %v: exit %v; want code 2\n%s", env, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], want) {
			t.Fatalf("env %v: output %q; want one line naming %s", env, out, want)
		}
		if strings.Contains(string(out), "hunter2") {
			t.Fatalf("env %v: output %q shows the database password", env, out)
		}
	}
	f(nil, "DATABASE_URL")
	f([]string{"DATABASE_URL=postgres://secret:hunter2@nowhere/x", "COUNTERD_SLOTS=lots"}, "COUNTERD_SLOTS")
	f([]string{"DATABASE_URL=postgres://x/y", "COUNTERD_SOCKET_MODE=rwx"}, "COUNTERD_SOCKET_MODE")
	f([]string{"DATABASE_URL=postgres://secret:hunter2@nowhere:port/x"}, "DATABASE_URL is not a valid PostgreSQL URL")
	f([]string{"DATABASE_URL=postgres://secret:hunter2@nowhere:port/x"}, "DATABASE_URL is not a valid PostgreSQL URL", "migrate")
	// A mistyped scheme, or keyword/value settings naming no server: pgx
	// read them as settings, and the daemon ran against the local socket.
	f([]string{"DATABASE_URL=postgress://secret:hunter2@nowhere/x?sslmode=disable"}, "DATABASE_URL is not a valid PostgreSQL URL or DSN: scheme postgress:// is neither")
	f([]string{"DATABASE_URL=postgress://secret:hunter2@nowhere/x?sslmode=disable"}, "DATABASE_URL is not a valid PostgreSQL URL or DSN: scheme postgress:// is neither", "migrate")
	f([]string{"DATABASE_URL=sslmode=disable password=hunter2"}, "DATABASE_URL is not a valid PostgreSQL URL or DSN: a keyword/value DSN must name host or dbname")
	f([]string{"DATABASE_URL=postgres://x/y", "COUNTERD_FSYNC=sometimes"}, `COUNTERD_FSYNC: invalid value "sometimes"; want always, everysec or no`)
}

// A removed variable still set is warned about once at start; the daemon
// runs. Before, COUNTERD_HOT_STRATEGY was ignored without a word.
func TestRemovedSettingWarned(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_HOT_STRATEGY=exact")
	var warned []string
	for _, line := range strings.Split(d.log(), "\n") {
		if strings.Contains(line, "COUNTERD_HOT_STRATEGY") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") || !strings.Contains(warned[0], "COUNTERD_SAMPLE_KEYS") {
		t.Fatalf("log lines naming COUNTERD_HOT_STRATEGY: %q; want one warning saying to use COUNTERD_SAMPLE_KEYS", warned)
	}
}

func TestHelpListsSettings(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, "-h").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"COUNTERD_SOCKET", "DATABASE_URL", "COUNTERD_FLUSH_INTERVAL", "migrate"} {
		if !strings.Contains(string(out), v) {
			t.Errorf("-h output lacks %s", v)
		}
	}
}

// Without a database the daemon still starts, journals increments, says
// it is not ready, answers reads with an error, and on SIGTERM exits 1
// saying the increments stay in the journal. The password is never logged.
func TestStartWithoutDatabase(t *testing.T) {
	t.Parallel()
	dir := shortDir(t)
	d := &daemon{t: t, socket: dir + "/s", env: []string{
		"DATABASE_URL=postgres://u:hunter2@/x?host=/nonexistent&connect_timeout=1",
		"COUNTERD_SOCKET=" + dir + "/s", "COUNTERD_JOURNAL_DIR=" + dir + "/j",
		"COUNTERD_METRICS_ADDR=127.0.0.1:0", "COUNTERD_FLUSH_TIMEOUT=1s", "COUNTERD_SHUTDOWN_TIMEOUT=1s",
	}}
	d.start()
	t.Cleanup(d.kill)
	ctx := context.Background()
	c := client(t, d.socket)
	if err := c.Incr(ctx, "post:1").Err(); err != nil {
		t.Fatalf("INCR without a database: %v; want it journaled and acknowledged", err)
	}
	if err := c.Get(ctx, "post:1").Err(); err == nil {
		t.Fatal("GET without a database: got a value; want -ERR")
	}
	resp, err := http.Get("http://" + d.metricsAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz without a database: %s; want 503", resp.Status)
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	if ee, ok := d.err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v; want code 1\n%s", d.err, d.log())
	}
	if !strings.Contains(d.log(), "stay in the journal") {
		t.Errorf("exit message does not say the increments are kept:\n%s", d.log())
	}
	if strings.Contains(d.log(), "hunter2") {
		t.Error("the log contains the database password")
	}
}

func TestMetricsEndpoints(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	c := client(t, d.socket)
	ctx := context.Background()
	if err := c.Incr(ctx, "post:m").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}
	addr := d.metricsAddr()
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/readyz":  "ready",
		"/metrics": "counterd_increments_accepted_total 1",
	} {
		body := httpGet(t, "http://"+addr+path)
		if !strings.Contains(body, want) {
			t.Errorf("GET %s: %q lacks %q", path, body, want)
		}
	}
	body := httpGet(t, "http://"+addr+"/metrics")
	for _, name := range []string{"counterd_flushes_total", "counterd_flush_duration_seconds", "counterd_flush_batch_keys", "counterd_pending_keys", "counterd_flush_errors_total", "counterd_connections"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if strings.Contains(d.log(), db.URL) {
		t.Error("the log contains DATABASE_URL")
	}
}

// /readyz asked the database only while no round was queued, so a round
// whose first attempt still waited on an unreachable database (a server
// that accepts and never answers) left it at 200.
func TestReadyzWhileFirstRoundWaits(t *testing.T) {
	t.Parallel()
	dir := shortDir(t)
	ln, err := net.Listen("unix", dir+"/.s.PGSQL.5432")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accept and never answer
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	d := &daemon{t: t, socket: dir + "/s", env: []string{
		"DATABASE_URL=postgres://u@/x?host=" + dir + "&port=5432&connect_timeout=120",
		"COUNTERD_SOCKET=" + dir + "/s", "COUNTERD_JOURNAL_DIR=" + dir + "/j",
		"COUNTERD_METRICS_ADDR=127.0.0.1:0", "COUNTERD_FLUSH_INTERVAL=10ms", "COUNTERD_SHUTDOWN_TIMEOUT=1s",
	}}
	d.start()
	t.Cleanup(d.kill)
	if err := client(t, d.socket).Incr(context.Background(), "post:1").Err(); err != nil {
		t.Fatalf("INCR: %v", err)
	}
	// Wait until the round is cut and queued behind the silent database.
	waitFor(t, 2*time.Minute, "a queued round", func() bool {
		return strings.Contains(httpGet(t, "http://"+d.metricsAddr()+"/metrics"), "counterd_queued_rounds 1")
	})
	resp, err := http.Get("http://" + d.metricsAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while the first round waits on a silent database: %s; want 503", resp.Status)
	}
}

// SIGHUP stops the daemon as SIGTERM does, and a log reader that went
// away does not kill it before it has drained: after the read end of its
// stderr is closed, the signal still writes what it acknowledged and the
// daemon exits 0. Before, SIGHUP killed it at once (status 129), and
// after SIGTERM its next log line killed it with SIGPIPE (status 141),
// leaving acknowledged increments for the journal's replay (found by
// `kill -TERM -- -PGID` on make run, whose tee died first).
func TestSignalWithLogReaderGone(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t, pgtest.Options{})
			d := newDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h") // only the stop writes
			cmd := exec.Command(binary)
			cmd.Env = d.env
			cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = pw
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			sc := bufio.NewScanner(pr)
			var logged strings.Builder
			for sc.Scan() && !strings.Contains(sc.Text(), "counterd ready") {
				logged.WriteString(sc.Text() + "\n")
			}
			c := client(t, d.socket)
			if err := c.IncrBy(context.Background(), "post:hup", 5).Err(); err != nil {
				t.Fatalf("INCRBY: %v\n%s", err, logged.String())
			}
			pr.Close() // the log's reader is gone
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("exit after %v with no log reader: %v; want status 0", sig, err)
				}
			case <-time.After(time.Minute):
				t.Fatalf("still running a minute after %v", sig)
			}
			if got := total(t, db, "post:hup"); got != 5 {
				t.Errorf("post:hup in PostgreSQL after %v: %d; want 5", sig, got)
			}
		})
	}
}

// A database that refuses the connection for good at start (no such
// database, a role that does not exist, a wrong password) is a bad
// DATABASE_URL: the daemon exits 2 at once with one line saying why,
// without the password. Before, it logged a warning, reported ready,
// acknowledged increments into the journal and retried forever.
func TestStartWithRefusingDatabase(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	f := func(name string, edit func(u *url.URL), want string) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bad := *u
			edit(&bad)
			d := newDaemon(t, db)
			cmd := exec.Command(binary)
			cmd.Env = append(d.env, "DATABASE_URL="+bad.String())
			cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
			done := make(chan struct{})
			var out []byte
			var err error // not the enclosing test's: the subtests run at once
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("still running a minute after start with %s; want it to exit", name)
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				t.Fatalf("exit: %v; want code 2\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "counterd: DATABASE_URL: ") || !strings.Contains(last, want) {
				t.Errorf("last line %q; want it to name DATABASE_URL and say %q", last, want)
			}
			if strings.Contains(string(out), "hunter2") {
				t.Error("the output shows the database password")
			}
			if strings.Contains(string(out), "counterd ready") {
				t.Errorf("reported ready with a database that refuses it:\n%s", out)
			}
		})
	}
	f("no such database", func(u *url.URL) { u.Path = "/no_such_database_x" }, "does not exist")
	f("no such role", func(u *url.URL) { u.User = url.UserPassword("no_such_role_x", "hunter2") }, "no_such_role_x")
}
