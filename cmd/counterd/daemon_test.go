package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/proctest"
)

// binary is counterd built once for every test in this package.
var binary string

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(proctest.Built(m, "counterd", ".", &binary))
}

// daemon is one counterd process started by a test.
type daemon struct {
	t       testing.TB
	cmd     *exec.Cmd
	socket  string
	journal string
	env     []string
	// wrap, when set, runs the binary through this command line (such as
	// sh -c 'ulimit -n 64; exec "$0"'), with the binary as its last word.
	wrap []string
	// cred, when set, runs the daemon as that user (the test must be root).
	cred *syscall.Credential
	// bin, when set, is the binary to run instead of the package's build.
	bin string

	mu      sync.Mutex
	stderr  strings.Builder
	changed chan struct{} // closed and replaced at each new log line
	exited  chan struct{}
	err     error
}

// shortDir returns a directory whose path is short enough for a Unix
// socket (t.TempDir paths can pass the 107-byte limit).
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startDaemon runs counterd against db with extra settings and returns
// once it logs that it is ready.
func startDaemon(t testing.TB, db *pgtest.DB, extra ...string) *daemon {
	t.Helper()
	d := newDaemon(t, db, extra...)
	d.start()
	t.Cleanup(d.kill)
	return d
}

// newDaemon returns a daemon with startDaemon's settings, not started.
func newDaemon(t testing.TB, db *pgtest.DB, extra ...string) *daemon {
	t.Helper()
	dir := shortDir(t)
	d := &daemon{t: t, socket: filepath.Join(dir, "c.sock"), journal: filepath.Join(dir, "journal")}
	d.env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"DATABASE_URL=" + db.URL,
		"COUNTERD_SOCKET=" + d.socket,
		"COUNTERD_JOURNAL_DIR=" + d.journal,
		"COUNTERD_METRICS_ADDR=127.0.0.1:0",
		"COUNTERD_LOG_LEVEL=debug",
	}, extra...)
	for _, name := range []string{"COUNTERD_IO", "COUNTERD_LOOPS"} {
		// The whole suite runs under either I/O mode and any loop count:
		// COUNTERD_IO=goroutines go test, COUNTERD_LOOPS=3 go test.
		if v := os.Getenv(name); v != "" {
			d.env = append([]string{name + "=" + v}, d.env...)
		}
	}
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	if !d.launch() {
		d.t.Fatalf("counterd exited before it was ready: %v\n%s", d.err, d.log())
	}
}

// launch starts the process and reports whether it became ready (false:
// it exited first).
func (d *daemon) launch() bool {
	d.t.Helper()
	bin := binary
	if d.bin != "" {
		bin = d.bin
	}
	d.cmd = exec.Command(bin)
	if len(d.wrap) > 0 {
		d.cmd = exec.Command(d.wrap[0], append(d.wrap[1:], bin)...)
	}
	d.cmd.Env = d.env
	d.cmd.Stdout = io.Discard
	// If the test binary dies (a timeout panic), the daemon dies with it.
	d.cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{Credential: d.cred})
	pr, pw := io.Pipe()
	d.cmd.Stderr = pw
	d.exited = make(chan struct{})
	d.mu.Lock()
	d.changed = make(chan struct{})
	d.mu.Unlock()
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	ready := make(chan struct{})
	drained := make(chan struct{}) // every line of the log is in d.stderr
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			d.mu.Lock()
			d.stderr.WriteString(sc.Text() + "\n")
			close(d.changed)
			d.changed = make(chan struct{})
			d.mu.Unlock()
			if strings.Contains(sc.Text(), "counterd ready") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	go func() {
		d.err = d.cmd.Wait()
		pw.Close()
		// Wait returns once the scanner has read the last bytes, not once
		// it has stored them: exited promises the whole log.
		<-drained
		close(d.exited)
	}()
	select {
	case <-ready:
		return true
	case <-d.exited:
		return false
	case <-time.After(2 * time.Minute): // a loaded machine's migrations are slow
		d.kill()
		d.t.Fatalf("counterd not ready after 2 minutes\n%s", d.log())
	}
	return false
}

// waitLog waits until the log contains substr, the process exits or
// timeout passes, and reports whether the log contains substr.
func (d *daemon) waitLog(substr string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		d.mu.Lock()
		found := strings.Contains(d.stderr.String(), substr)
		changed := d.changed
		d.mu.Unlock()
		if found {
			return true
		}
		select {
		case <-changed:
		case <-d.exited:
			return strings.Contains(d.log(), substr)
		case <-deadline:
			return false
		}
	}
}

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		d.t.Fatalf("counterd did not exit within 60s of SIGTERM\n%s", d.log())
	}
	if d.err != nil {
		d.t.Fatalf("counterd exit: %v\n%s", d.err, d.log())
	}
}

// restart starts the daemon again with the same settings, socket and
// journal, after it has exited.
func (d *daemon) restart() {
	d.t.Helper()
	<-d.exited
	d.mu.Lock()
	d.stderr.Reset()
	d.mu.Unlock()
	d.start()
}

// kill ends the process at once (SIGKILL) if it still runs.
func (d *daemon) kill() {
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// metricsAddr is the address the daemon logged for its metrics listener.
func (d *daemon) metricsAddr() string {
	d.t.Helper()
	for _, line := range strings.Split(d.log(), "\n") {
		if _, rest, ok := strings.Cut(line, `msg="serving metrics" addr=`); ok {
			return strings.Fields(rest)[0]
		}
	}
	d.t.Fatalf("no metrics address in the log\n%s", d.log())
	return ""
}

func httpGet(t testing.TB, url string) string {
	t.Helper()
	code, body := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	return body
}

// total reads counter_totals for key.
func total(t testing.TB, db *pgtest.DB, key string) int64 {
	t.Helper()
	var n int64
	err := db.Pool.QueryRow(context.Background(),
		`SELECT coalesce((SELECT total FROM counter_totals WHERE key = $1), 0)`, key).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
