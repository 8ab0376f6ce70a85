package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// output keeps what a process printed and tells waiters when it grows.
type output struct {
	mu      sync.Mutex
	text    strings.Builder
	changed chan struct{} // closed and replaced at each new line
	done    chan struct{} // closed at the end of the output
}

func newOutput(r io.Reader) *output {
	o := &output{changed: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			o.mu.Lock()
			o.text.WriteString(sc.Text() + "\n")
			close(o.changed)
			o.changed = make(chan struct{})
			o.mu.Unlock()
		}
	}()
	return o
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.text.String()
}

// waitFor reports whether the output contains substr within timeout.
func (o *output) waitFor(substr string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		o.mu.Lock()
		found, changed := strings.Contains(o.text.String(), substr), o.changed
		o.mu.Unlock()
		if found {
			return true
		}
		select {
		case <-changed:
		case <-o.done:
			return strings.Contains(o.String(), substr)
		case <-deadline:
			return false
		}
	}
}

// Ctrl-C in `make run` stops counterd as SIGTERM does: it drains and
// flushes, so what it acknowledged is in PostgreSQL and not left in the
// journal; the script removes nothing but what it made, stops everything
// it started, says "stopped" and exits 0, and make reports no error.
// Ctrl-C is SIGINT to the whole foreground process group: the script
// runs in a group of its own here, as a terminal's foreground job does,
// and the test signals the group. The tee of counterd's log used to die
// of that SIGINT and take counterd with it (SIGPIPE) before its final
// flush; the script exited 130. SIGTERM to the group (kill -- -PGID) and
// SIGHUP (a closed terminal) stop it the same way, a second make run in
// the same run directory is refused, and no password in DATABASE_URL is
// shown.
func TestRunScriptCtrlC(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(shortDir(t), "bin")
	if out, err := exec.Command("go", "build", "-o", bin+"/", ".", "../rollup").CombinedOutput(); err != nil {
		t.Fatalf("build counterd and rollup: %v\n%s", err, out)
	}
	f := func(name string, sig syscall.Signal, argv ...string) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t, pgtest.Options{NoMigrate: true})
			// The throwaway server trusts its users, so a password in the
			// URL still connects: nothing may show it.
			u, err := url.Parse(db.URL)
			if err != nil {
				t.Fatal(err)
			}
			u.User = url.UserPassword(u.User.Username(), "hunter2")
			dir := shortDir(t)
			socket, journal := filepath.Join(dir, "run", "c.sock"), filepath.Join(dir, "journal")
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = "../.."
			cmd.Env = append(os.Environ(),
				"DATABASE_URL="+u.String(), "BIN="+bin, "RUN_DIR="+filepath.Join(dir, "run"),
				"COUNTERD_SOCKET="+socket, "COUNTERD_JOURNAL_DIR="+journal,
				"COUNTERD_METRICS_ADDR=127.0.0.1:0",
				"COUNTERD_FLUSH_INTERVAL=1h", // only the stop writes the increments
			)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout, cmd.Stderr = pw, pw
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			out := newOutput(pr)
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Whatever happens, nothing the script started outlives the test.
			t.Cleanup(func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-out.done
			})
			if !out.waitFor("Ctrl-C stops", 3*time.Minute) {
				t.Fatalf("no banner within 3 minutes:\n%s", out)
			}

			c, err := net.Dial("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Minute))
			if _, err := c.Write([]byte("INCRBY post:run 7\r\nINCR post:run2\r\n")); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(c)
			for _, want := range []string{":7\r\n", ":1\r\n"} {
				if got, err := r.ReadString('\n'); err != nil || got != want {
					t.Fatalf("reply: got %q, %v; want %q", got, err, want)
				}
			}

			if sig == syscall.SIGINT {
				// A second make run in the same run directory is refused
				// and leaves the first one's log alone (before, it emptied
				// it).
				second := exec.Command("bash", "scripts/run.sh")
				second.Dir, second.Env = cmd.Dir, cmd.Env
				second.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
				sout, serr := second.CombinedOutput()
				if serr == nil || !strings.Contains(string(sout), "another make run") {
					t.Errorf("second make run in the same RUN_DIR: %v, %q; want it refused", serr, sout)
				}
				logText, err := os.ReadFile(filepath.Join(dir, "run", "counterd.log"))
				if err != nil || !strings.Contains(string(logText), "counterd ready") {
					t.Errorf("the first run's log after a second run: %v, %q; want it kept", err, logText)
				}
			}

			if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
				t.Fatal(err)
			}
			var werr error
			select {
			case werr = <-exited:
			case <-time.After(2 * time.Minute):
				t.Fatalf("still running 2 minutes after %v:\n%s", sig, out)
			}
			<-out.done
			text := out.String()
			var exitErr *exec.ExitError
			switch {
			case argv[0] != "make" && werr != nil:
				t.Errorf("exit after %v: %v; want status 0", sig, werr)
			case argv[0] == "make" && werr != nil && !errors.As(werr, &exitErr):
				t.Errorf("make: %v", werr)
			case strings.Contains(text, "make: ***"):
				// make ends itself with the SIGINT it got, as it should,
				// but reports an error only when the script failed.
				t.Errorf("make reports an error for a Ctrl-C")
			}
			if !strings.Contains(text, "make run: stopped\n") {
				t.Errorf("no \"make run: stopped\" line")
			}
			if strings.Contains(text, "hunter2") {
				t.Errorf("the output shows the database password")
			}
			if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket %s after the stop: %v; want it removed", socket, err)
			}
			if err := syscall.Kill(-cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("processes of the script's group still running after it exited (%v)", err)
			}
			for key, want := range map[string]int64{"post:run": 7, "post:run2": 1} {
				if got := total(t, db, key); got != want {
					t.Errorf("%s in PostgreSQL after %v: got %d; want %d", key, sig, got, want)
				}
			}
			assertJournalEmpty(t, journal)
			if t.Failed() {
				t.Logf("output:\n%s", text)
			}
		})
	}
	f("script", syscall.SIGINT, "bash", "scripts/run.sh")
	// kill -- -PGID, and a closed terminal or tmux session: before, the
	// tee of counterd's log died of them first and counterd of SIGPIPE
	// (status 141), or counterd of the SIGHUP itself, before its flush.
	f("script-term", syscall.SIGTERM, "bash", "scripts/run.sh")
	f("script-hup", syscall.SIGHUP, "bash", "scripts/run.sh")
	if _, err := exec.LookPath("make"); err == nil {
		f("make", syscall.SIGINT, "make", "-s", "run", "BIN="+bin)
	}
}

// make run and make test refuse a DATABASE_URL counterd would refuse,
// with exit 2 and one line naming it, before starting anything. Before,
// psql and pgx read postgress://u:pw@h/db?sslmode=disable as keyword/value
// settings, database.sh let it through, and counterd ran against the
// local socket.
func TestScriptsRefuseForeignScheme(t *testing.T) {
	t.Parallel()
	f := func(script, variable, value, want string) {
		t.Helper()
		cmd := exec.Command("bash", script)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), variable+"="+value, "RUN_DIR="+filepath.Join(shortDir(t), "run"), "BIN=/nonexistent")
		cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || string(out) != want {
			t.Errorf("%s with %s=%s: %v, %q; want exit 2 and %q", script, variable, value, err, out, want)
		}
	}
	scheme := "database.sh: DATABASE_URL is not a valid PostgreSQL URL or DSN: scheme postgress:// is neither postgres:// nor postgresql://\n"
	f("scripts/run.sh", "DATABASE_URL", "postgress://u:hunter2@localhost/x?sslmode=disable", scheme)
	f("scripts/run.sh", "DATABASE_URL", "postgress://u:hunter2@localhost/x", scheme)
	f("scripts/run.sh", "DATABASE_URL", "sslmode=disable password=hunter2",
		"database.sh: DATABASE_URL is not a valid PostgreSQL URL or DSN: a keyword/value DSN must name host or dbname\n")
	f("scripts/test.sh", "TEST_DATABASE_URL", "mysql://u:hunter2@localhost/x",
		"database.sh: TEST_DATABASE_URL is not a valid PostgreSQL URL or DSN: scheme mysql:// is neither postgres:// nor postgresql://\n")
}

// fakeBin returns a directory holding stand-ins for counterd and rollup
// for make run: counterd writes its COUNTERD_JOURNAL_DIR to the file
// journal beside them, says it is ready and waits for SIGTERM; rollup
// runs rollupScript.
func fakeBin(t *testing.T, rollupScript string) string {
	t.Helper()
	bin := shortDir(t)
	counterd := `#!/bin/sh
printf '%s\n' "$COUNTERD_JOURNAL_DIR" >"$(dirname "$0")/journal"
echo 'level=INFO msg="counterd ready" socket=/nonexistent/c.sock' >&2
trap 'exit 0' TERM
while :; do sleep 1; done
`
	for name, text := range map[string]string{"counterd": counterd, "rollup": "#!/bin/sh\n" + rollupScript} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// make run prints its banner only once rollup has checked its settings:
// a rollup that refuses ROLLUP_TARGETS stops make run before it, which
// says so. Before, the banner said all was running, then rollup exited.
func TestRunScriptWaitsForRollup(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true})
	bin := fakeBin(t, `echo 'rollup: ROLLUP_TARGETS: no table posts' >&2; exit 2`)
	cmd := exec.Command("bash", "scripts/run.sh")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db.URL, "BIN="+bin, "RUN_DIR="+filepath.Join(shortDir(t), "run"))
	cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "Ctrl-C stops") || !strings.Contains(string(out), "rollup: ROLLUP_TARGETS: no table posts") ||
		!strings.Contains(string(out), "make run: rollup failed to start") {
		t.Fatalf("make run with a rollup that refuses its settings: %v\n%s\nwant it to fail saying rollup failed to start, with no banner", err, out)
	}
}

// Plain and partitioned make run keep their journals apart: a journal
// belongs to the database it writes. Before, both used .journal/, and
// each switch warned that the journal moved to another database (or
// refused to start while it held rounds).
func TestRunScriptJournalPerLayout(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true})
	// A cluster of the test's own (scripts/cluster.sh's databases
	// <name>_proxy and <name>_p0), never make run's counterd.
	name := fmt.Sprintf("runtest_%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		for _, d := range []string{name + "_proxy", name + "_p0"} {
			if _, err := db.Pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+d+" WITH (FORCE)"); err != nil {
				t.Errorf("drop %s: %v", d, err)
			}
		}
	})
	// rollup has nothing to check here; it stops make run at once.
	bin := fakeBin(t, `echo 'msg="rollup scheduled"' >&2; exit 3`)
	journal := func(extra ...string) string {
		t.Helper()
		cmd := exec.Command("bash", "scripts/run.sh")
		cmd.Dir = "../.."
		// The server's URL: psql, which cluster.sh runs, refuses db.URL's
		// search_path parameter.
		cmd.Env = append(os.Environ(), append([]string{"DATABASE_URL=" + pgtest.URL(t), "BIN=" + bin, "RUN_DIR=" + filepath.Join(shortDir(t), "run")}, extra...)...)
		cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
		out, err := cmd.CombinedOutput()
		if !strings.Contains(string(out), "make run: counterd or rollup exited (status 3)") {
			t.Fatalf("make run %v: %v\n%s\nwant it to stop when rollup exits", extra, err, out)
		}
		b, err := os.ReadFile(filepath.Join(bin, "journal"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	plain := journal()
	partitioned := journal("COUNTERD_PARTITIONS=1", "COUNTERD_CLUSTER="+name)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if plain != filepath.Join(root, ".journal") || partitioned != filepath.Join(root, ".journal-"+name) {
		t.Fatalf("journals: plain %s, partitioned %s; want %s/.journal and %s/.journal-%s", plain, partitioned, root, root, name)
	}
}
