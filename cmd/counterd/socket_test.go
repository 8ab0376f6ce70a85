package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// A second daemon on the same socket path fails with a clear error and
// leaves the first one's socket alone, even while the first one's accept
// backlog is full (which made the old dial probe judge it stale).
func TestSecondDaemonCannotStealSocket(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	first := startDaemon(t, db)
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.cmd.Process.Signal(syscall.SIGCONT) })
	// A stopped daemon accepts nothing: fill its backlog (somaxconn).
	var backlog []net.Conn
	defer func() {
		for _, c := range backlog {
			c.Close()
		}
	}()
	full := false
	for range 70000 {
		c, err := net.Dial("unix", first.socket)
		if err != nil {
			full = true
			break
		}
		backlog = append(backlog, c)
	}
	if !full {
		t.Fatalf("backlog not full after %d connections", len(backlog))
	}

	second := newDaemon(t, db)
	second.env = append(second.env, "COUNTERD_SOCKET="+first.socket) // a later value wins
	if second.launch() {
		second.kill()
		t.Fatalf("a second daemon took the socket of a live one (backlog full after %d connections)\n%s", len(backlog), second.log())
	}
	if ee, ok := second.err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("second daemon: exit %v; want code 1\n%s", second.err, second.log())
	}
	if !strings.Contains(second.log(), "another counterd is serving this socket") || !strings.Contains(second.log(), "COUNTERD_SOCKET") {
		t.Errorf("second daemon's error does not say the socket is in use:\n%s", second.log())
	}

	for _, c := range backlog {
		c.Close()
	}
	backlog = nil
	if err := first.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The resumed daemon first accepts (and drops) the closed connections
	// still in its backlog; until it has, a dial finds the backlog full.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("unix", first.socket)
		if err == nil {
			c.Close()
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("the first daemon did not accept again within a minute: %v", err)
		}
	}
	ping(t, first.socket)
	first.stop()
}

// With COUNTERD_SOCKET unset the socket goes under XDG_RUNTIME_DIR in a
// directory created 0700; a directory others can write is refused, naming
// the variable and the directory.
func TestSocketDirectory(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	runtime := shortDir(t)
	d := newDaemon(t, db, "COUNTERD_SOCKET=", "XDG_RUNTIME_DIR="+runtime)
	d.socket = filepath.Join(runtime, "counterd", "counterd.sock")
	d.start()
	t.Cleanup(d.kill)
	fi, err := os.Stat(filepath.Dir(d.socket))
	if err != nil {
		t.Fatalf("default socket directory: %v\n%s", err, d.log())
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("socket directory mode: got %o; want 700", got)
	}
	ping(t, d.socket)
	d.stop()
	if _, err := os.Stat(d.socket); !os.IsNotExist(err) {
		t.Errorf("socket left after a clean stop: %v", err)
	}

	open := filepath.Join(shortDir(t), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	bad := newDaemon(t, db, "COUNTERD_SOCKET="+filepath.Join(open, "c.sock"))
	if bad.launch() {
		bad.kill()
		t.Fatal("counterd listened in a 0777 directory")
	}
	if log := bad.log(); !strings.Contains(log, "COUNTERD_SOCKET") || !strings.Contains(log, open) || !strings.Contains(log, "writable by group or others") {
		t.Fatalf("error does not name COUNTERD_SOCKET and %s:\n%s", open, log)
	}
	if _, err := os.Lstat(filepath.Join(open, "c.sock")); !os.IsNotExist(err) {
		t.Fatalf("socket created in a 0777 directory: %v", err)
	}
	// The socket directory is checked before anything else is created.
	if _, err := os.Lstat(bad.journal); !os.IsNotExist(err) {
		t.Errorf("a refused socket directory left a journal directory behind: %v", err)
	}
	if ee, ok := bad.err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("exit %v; want code 2 (a setting to change)", bad.err)
	}

	// Only the socket's directory is created: a missing parent is a
	// setting to change too. Before, it exited 1 with mkdir's error.
	missing := filepath.Join(shortDir(t), "missing")
	orphan := newDaemon(t, db, "COUNTERD_SOCKET="+filepath.Join(missing, "dir", "c.sock"))
	if orphan.launch() {
		orphan.kill()
		t.Fatal("counterd listened under a missing directory")
	}
	want := "COUNTERD_SOCKET: socket directory " + filepath.Join(missing, "dir") + " cannot be created: its parent " + missing + " does not exist; create " + missing + " first"
	if log := orphan.log(); !strings.Contains(log, want) {
		t.Errorf("log:\n%s\nwant it to say %q", log, want)
	}
	if ee, ok := orphan.err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("socket directory's parent missing: exit %v; want code 2 (a setting to change)", orphan.err)
	}
}

// The hijack: for a daemon that is not root and listens on the default
// /tmp/counterd-<uid>/counterd.sock, another user pre-creates that path
// as a symbolic link to a directory the daemon's user owns. Followed, the
// daemon would serve there, and the link's owner could later repoint it
// at a fake server that collects AUTH passwords and acknowledges
// increments it drops. counterd must refuse the link before it creates
// anything (exit 2), naming it, its owner and what to do.
func TestSocketDirectorySymlinkHijack(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs the daemon as uid 65534 and makes a link owned by uid 12345")
	}
	const victim, attacker = 65534, 12345
	db := pgtest.New(t, pgtest.Options{})
	base := shortDir(t)
	tmp := filepath.Join(base, "tmp")   // plays /tmp: root's, 1777
	own := filepath.Join(base, "own")   // a directory the daemon's user owns
	jdir := filepath.Join(base, "data") // where the daemon's user keeps its journal
	for _, m := range []struct {
		path  string
		mode  os.FileMode
		owner int
	}{{base, 0o755, 0}, {tmp, 0o777 | os.ModeSticky, 0}, {own, 0o700, victim}, {jdir, 0o700, victim}} {
		if err := os.MkdirAll(m.path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(m.path, m.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(m.path, m.owner, m.owner); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(tmp, "counterd-65534")
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, attacker, attacker); err != nil {
		t.Fatal(err)
	}

	journalDir := filepath.Join(jdir, "journal")
	d := newDaemon(t, db, "COUNTERD_SOCKET=", "XDG_RUNTIME_DIR=", "TMPDIR="+tmp, "COUNTERD_JOURNAL_DIR="+journalDir)
	d.socket = filepath.Join(link, "counterd.sock")
	d.cred = &syscall.Credential{Uid: victim, Gid: victim}
	if d.launch() {
		d.kill()
		t.Fatalf("counterd served through a link another user owns\n%s", d.log())
	}
	log := d.log()
	for _, want := range []string{"COUNTERD_SOCKET", link, "symbolic link owned by uid 12345", "remove"} {
		if !strings.Contains(log, want) {
			t.Errorf("the error does not say %q:\n%s", want, log)
		}
	}
	if ee, ok := d.err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("exit %v; want code 2 (a setting or the environment to change)\n%s", d.err, log)
	}
	for _, p := range []string{filepath.Join(own, "counterd.sock"), filepath.Join(own, "counterd.sock.lock"), journalDir} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after a refused start (%v)", p, err)
		}
	}
}

// A journal directory others can write is refused at start (exit 2):
// whoever can write it can plant segments that replay as increments.
func TestJournalDirectoryPermissions(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := newDaemon(t, db)
	if err := os.Mkdir(d.journal, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d.journal, 0o777); err != nil {
		t.Fatal(err)
	}
	if d.launch() {
		d.kill()
		t.Fatalf("counterd accepted a 0777 journal directory\n%s", d.log())
	}
	log := d.log()
	for _, want := range []string{"COUNTERD_JOURNAL_DIR", d.journal, "writable by group or others (mode 0777)", "chmod 700"} {
		if !strings.Contains(log, want) {
			t.Errorf("the error does not say %q:\n%s", want, log)
		}
	}
	if ee, ok := d.err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("exit %v; want code 2\n%s", d.err, log)
	}
}
