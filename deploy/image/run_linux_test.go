package image_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/counterd/counterd/deploy/image"
	"github.com/counterd/counterd/internal/pgtest"
)

// runScript runs on the host's bash inside `unshare --mount`: it
// bind-mounts each host directory named in its arguments onto its place in
// the unpacked image (in the new mount namespace only, so the mounts go
// when counterd exits), then execs chroot, which execs counterd as the
// image's user. The image has no shell to do this from the inside, and
// every exec keeps the process: the PID the test holds is counterd's, so
// its SIGTERM reaches counterd and its exit status is counterd's.
const runScript = `set -eu
mount=$1 chroot=$2 user=$3 rootfs=$4
shift 4
while [ "$1" != -- ]; do
	"$mount" --bind "$1" "$rootfs$2"
	shift 2
done
shift
exec "$chroot" --userspec="$user" --groups="${user#*:}" "$rootfs" "$@"
`

// runImage runs counterd from the unpacked image rootfs as the image's
// user, with only the socket and journal volumes (and PostgreSQL's socket
// directory) mounted in, counts through the socket from outside, and stops
// it with SIGTERM.
//
// Not with podman: here crun is refused setrlimit and cgroups, so `podman
// run` cannot start a container. A mount namespace, bind mounts and
// chroot(1) --userspec give what this test needs from a container (the
// image's files and nothing else of the host's, the image's user, its
// environment, the two volumes), not its isolation: the network and PID
// namespaces are the host's. chroot starts counterd in /, not the image's
// WORKDIR; the image's settings name absolute paths, so nothing depends on
// it.
func runImage(t *testing.T, rootfs string, cfg v1.Config) {
	if os.Geteuid() != 0 {
		t.Skip("running the image needs root (mount namespaces, chroot, running as uid 65532); the build checks above ran")
	}
	tools := map[string]string{}
	for _, name := range []string{"unshare", "mount", "chroot", "bash"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("running the image needs %s (util-linux, coreutils): %v; the build checks above ran", name, err)
		}
		tools[name] = p
	}
	uid, gid, _ := strings.Cut(cfg.User, ":")
	u, _ := strconv.Atoi(uid)
	g, _ := strconv.Atoi(gid)

	db := pgtest.New(t, pgtest.Options{})

	// The two volumes: host directories owned by the image's user, as a
	// runtime's fresh named volume copies them from the image.
	host := t.TempDir()
	mounts := map[string]string{ // image path -> host directory
		image.SocketDir: filepath.Join(host, "run"),
		image.StateDir:  filepath.Join(host, "state"),
	}
	for _, dir := range mounts {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, u, g); err != nil {
			t.Fatal(err)
		}
	}
	// The third mount: TEST_DATABASE_URL names PostgreSQL's Unix socket
	// directory (make test's server listens on no TCP port), which a
	// chroot cannot see; in a pod counterd would reach PostgreSQL over
	// TCP. A TCP host needs nothing: the network is the host's.
	pgcfg, err := pgconn.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range append([]string{pgcfg.Host}, fallbackHosts(pgcfg)...) {
		if !strings.HasPrefix(h, "/") || mounts[h] != "" {
			continue
		}
		if err := os.MkdirAll(filepath.Join(rootfs, h), 0o755); err != nil {
			t.Fatal(err)
		}
		mounts[h] = h
	}

	// inImage returns the command that runs argv in the image as its
	// user, with the image's environment and nothing of the test's (as a
	// runtime starts it) plus env.
	inImage := func(env []string, argv ...string) *exec.Cmd {
		args := []string{"--mount", "--propagation", "private", tools["bash"], "-c", runScript, "run-image",
			tools["mount"], tools["chroot"], cfg.User, rootfs}
		for _, in := range slices.Sorted(maps.Keys(mounts)) {
			args = append(args, mounts[in], in)
		}
		args = append(append(args, "--"), argv...)
		cmd := exec.Command(tools["unshare"], args...)
		cmd.Env = append(slices.Clone(cfg.Env), env...)
		// If the test binary dies, so does what it started (until
		// chroot changes user, which clears this; the test's own
		// Cleanup and waits cover every ordinary end).
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	// What a deployment sets: DATABASE_URL. Metrics move to a port the
	// kernel picks, since the network is the host's and another process
	// may hold 9464 (the image's own address is checked in config). FLUSH,
	// GET and the drain wait on PostgreSQL: bounds of minutes, not
	// counterd's 10 s and 30 s, keep a loaded machine's slow commits from
	// failing the test.
	cmd := inImage([]string{"DATABASE_URL=" + db.URL, "COUNTERD_METRICS_ADDR=127.0.0.1:0",
		"COUNTERD_FLUSH_TIMEOUT=2m", "COUNTERD_SHUTDOWN_TIMEOUT=2m"}, cfg.Entrypoint...)
	d := startDaemon(t, cmd)

	sock := filepath.Join(mounts[image.SocketDir], strings.TrimPrefix(image.Socket, image.SocketDir))
	// A loaded machine migrates (a no-op here, pgtest did it) and replays
	// slowly: the bound only keeps a broken start from hanging the test.
	d.waitFor(t, "counterd ready", 3*time.Minute)

	// The volumes were used, by the image's user: counterd created the
	// socket's and the journal's directories 0700 as uid 65532.
	for _, p := range []string{filepath.Dir(sock), filepath.Join(mounts[image.StateDir], strings.TrimPrefix(image.JournalDir, image.StateDir))} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("counterd did not create %s in its volume: %v\n%s", p, err, d.output())
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != u || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: owner %d mode %v; want %d and 0700", p, st.Uid, fi.Mode().Perm(), u)
		}
	}

	// 10,000 INCRs over four keys, four connections at once, pipelined.
	const keys, perKey = 4, 2500
	var wg sync.WaitGroup
	errs := make(chan error, keys)
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- incr(sock, fmt.Sprintf("image:%d", k), perKey)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("%v\n%s", err, d.output())
		}
	}
	c, err := dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := c.do("FLUSH"); err != nil || got != "+OK" {
		t.Fatalf("FLUSH: got %q, %v; want +OK\n%s", got, err, d.output())
	}
	for k := range keys {
		key := fmt.Sprintf("image:%d", k)
		if got := total(t, db, key); got != perKey {
			t.Errorf("counter_totals %s after FLUSH: got %d; want %d", key, got, perKey)
		}
		if got, err := c.do("GET", key); err != nil || got != strconv.Itoa(perKey) {
			t.Errorf("GET %s: got %q, %v; want %d", key, got, err, perKey)
		}
	}

	// Increments acknowledged just before SIGTERM, never flushed: the
	// drain writes them before counterd exits 0.
	if err := incr(sock, "image:drain", 1000); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// counterd's own shutdown bound (COUNTERD_SHUTDOWN_TIMEOUT) is 2 min
	// twice; this one only keeps a hung drain from hanging the test.
	if err := d.wait(5 * time.Minute); err != nil {
		t.Fatalf("counterd after SIGTERM: %v; want exit 0\n%s", err, d.output())
	}
	if out := d.output(); !strings.Contains(out, "flushed everything") {
		t.Errorf("counterd's log does not say it flushed everything:\n%s", out)
	}
	if got := total(t, db, "image:drain"); got != 1000 {
		t.Errorf("counter_totals image:drain after SIGTERM: got %d; want 1000\n%s", got, d.output())
	}
	t.Logf("counterd from the image, as %s:\n%s", cfg.User, d.output())

	// rollup from the same image (--entrypoint rollup: PATH names it)
	// folds every slot row into counters.
	rollup := inImage([]string{"DATABASE_URL=" + db.URL}, "rollup", "once")
	r := startDaemon(t, rollup)
	if err := r.wait(5 * time.Minute); err != nil {
		t.Fatalf("rollup once: %v; want exit 0\n%s", err, r.output())
	}
	t.Logf("rollup once from the image:\n%s", r.output())
	for key, want := range map[string]int64{"image:0": perKey, "image:drain": 1000} {
		if got := folded(t, db, key); got != want {
			t.Errorf("counters %s after rollup once: got %d; want %d (every slot row folded)", key, got, want)
		}
	}
}

// folded reads key's folded total from counters, and fails the test if
// any slot row of it is left.
func folded(t *testing.T, db *pgtest.DB, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n, slots int64
	err := db.Pool.QueryRow(ctx, `SELECT coalesce((SELECT total::bigint FROM counters WHERE key = $1), 0),
		(SELECT count(*) FROM counter_slots WHERE key = $1)`, key).Scan(&n, &slots)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	if slots != 0 {
		t.Errorf("counter_slots holds %d rows of %s after rollup once; want 0", slots, key)
	}
	return n
}

// fallbackHosts returns the other hosts pgx may try (a URL's host list).
func fallbackHosts(cfg *pgconn.Config) []string {
	var hosts []string
	for _, f := range cfg.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	return hosts
}

// total reads key's total from counter_totals.
func total(t *testing.T, db *pgtest.DB, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n int64
	err := db.Pool.QueryRow(ctx, "SELECT coalesce((SELECT total FROM counter_totals WHERE key = $1), 0)", key).Scan(&n)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return n
}

// daemon is a started counterd whose output the test reads.
type daemon struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    strings.Builder
	lines  chan string   // each line, until the output ends
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's, once exited is closed
}

// startDaemon starts cmd with its output collected, and stops it (SIGKILL)
// when the test ends if it still runs.
func startDaemon(t *testing.T, cmd *exec.Cmd) *daemon {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	d := &daemon{cmd: cmd, lines: make(chan string, 1024), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(d.lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.mu.Lock()
			d.out.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			select {
			case d.lines <- sc.Text():
			default: // nobody waits for a line now; output() has it
			}
		}
	}()
	go func() {
		d.err = cmd.Wait()
		pw.Close()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = cmd.Process.Kill()
			<-d.exited
		}
	})
	return d
}

// waitFor waits until a line of output contains s, failing the test if
// counterd exits first or after timeout.
func (d *daemon) waitFor(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				<-d.exited
				t.Fatalf("counterd exited (%v) before %q:\n%s", d.err, s, d.output())
			}
			if strings.Contains(line, s) {
				return
			}
		case <-timer.C:
			t.Fatalf("no %q from counterd in %v:\n%s", s, timeout, d.output())
		}
	}
}

// wait waits for counterd to exit, at most timeout, and returns how.
func (d *daemon) wait(timeout time.Duration) error {
	select {
	case <-d.exited:
		return d.err
	case <-time.After(timeout):
		return fmt.Errorf("still running after %v", timeout)
	}
}

func (d *daemon) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// conn is a minimal RESP client: enough for INCR, GET and FLUSH.
type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(sock string) (*conn, error) {
	c, err := net.DialTimeout("unix", sock, 30*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, r: bufio.NewReader(c)}, nil
}

// command encodes one command as a RESP array of bulk strings.
func command(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// do sends one command and returns its reply: a simple string or error
// with its sign (+OK, -ERR ...), an integer's digits, a bulk string's
// content.
func (c *conn) do(args ...string) (string, error) {
	if _, err := io.WriteString(c, command(args...)); err != nil {
		return "", err
	}
	return c.reply()
}

func (c *conn) reply() (string, error) {
	// Beyond COUNTERD_FLUSH_TIMEOUT (2 min here), which bounds FLUSH and
	// GET: counterd replies an error first.
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Minute))
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch {
	case strings.HasPrefix(line, ":"):
		return line[1:], nil
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line, nil
}

// incr sends n INCRs of key on a connection of its own, pipelined 500 at
// a time, and checks each reply is :1 (counterd replies the amount added).
func incr(sock, key string, n int) error {
	c, err := dial(sock)
	if err != nil {
		return err
	}
	defer c.Close()
	one := command("INCR", key)
	for sent := 0; sent < n; {
		batch := min(500, n-sent)
		if _, err := io.WriteString(c, strings.Repeat(one, batch)); err != nil {
			return fmt.Errorf("INCR %s: %w", key, err)
		}
		for range batch {
			got, err := c.reply()
			if err != nil {
				return fmt.Errorf("INCR %s: %w", key, err)
			}
			if got != "1" {
				return errors.New("INCR " + key + ": got " + got + "; want 1")
			}
		}
		sent += batch
	}
	return nil
}
