package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// The client tests run one scenario through each real client library with
// its default options against a real daemon, then compare PostgreSQL with
// what the library was asked to send. Go libraries run it in this process
// (clients_go_test.go); Node and Python libraries run it as a script under
// testdata/clients, installed by scripts/clients.sh, which prints a
// clientReport as JSON.

// scenarioSteps are the steps every client runs, in order. A step's keys
// are named "<prefix>:<step>[:...]", so a total in PostgreSQL names the
// step that sent it.
var scenarioSteps = []string{
	"connect",      // connect and PING
	"incr",         // INCR three times
	"incrby",       // INCRBY 5, INCRBY -2
	"get",          // GET of the incr key
	"mget",         // MGET of two counted keys and one never counted
	"pipeline",     // a non-transactional pipeline of 20 INCR/INCRBY
	"transaction",  // MULTI, INCR, INCRBY 4, EXEC through the library's API
	"pipeline100k", // one pipeline of 100,000 INCR over 4 keys
	"flush",        // FLUSH
}

// clientReport is what one client's run of the scenario did.
type clientReport struct {
	Client  string       `json:"client"`
	Version string       `json:"version"`
	Steps   []stepResult `json:"steps"`
	// Sent is every increment handed to the library, acknowledged or not.
	Sent map[string]int64 `json:"sent"`
}

type stepResult struct {
	Name  string `json:"name"`
	Error string `json:"error"` // empty when the step passed
}

// clientsRequired makes a missing tool or library fail the client tests
// rather than skip them (CI sets it; see .ci/run and scripts/clients.sh).
func clientsRequired() bool { return os.Getenv("COUNTERD_CLIENTS_REQUIRED") == "1" }

// clientFlushTimeout bounds how long FLUSH, GET and MGET wait for
// PostgreSQL: longer than the default 10 s, which a loaded machine's
// commits can take, and shorter than a scenario step (20 s), so a step
// gets the daemon's answer. A FLUSH not confirmed in time says so, and
// the scenario asks again.
const clientFlushTimeout = "COUNTERD_FLUSH_TIMEOUT=15s"

// needTool skips the test, naming what is missing, or fails it under
// COUNTERD_CLIENTS_REQUIRED=1.
func needTool(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if clientsRequired() {
		t.Fatalf("%s (COUNTERD_CLIENTS_REQUIRED=1)", msg)
	}
	t.Skip(msg)
}

// checkReport fails the test for each step the client could not do, then
// FLUSHes through a RESP2 connection of its own and requires PostgreSQL to
// hold exactly the increments sent: no key missing, no key extra, no total
// off.
func checkReport(t *testing.T, db *pgtest.DB, d *daemon, rep clientReport) {
	t.Helper()
	name := rep.Client + " " + rep.Version
	failed := map[string]string{}
	var summary []string
	ran := map[string]bool{}
	for _, s := range rep.Steps {
		ran[s.Name] = true
		if s.Error != "" {
			failed[s.Name] = s.Error
			t.Errorf("%s: step %s: %s", name, s.Name, s.Error)
			summary = append(summary, s.Name+" FAIL")
		} else {
			summary = append(summary, s.Name+" ok")
		}
	}
	for _, s := range scenarioSteps {
		if !ran[s] {
			t.Errorf("%s: step %s: did not run", name, s)
		}
	}
	t.Logf("%s: %s", name, strings.Join(summary, ", "))

	if t.Failed() {
		logDaemonTrouble(t, d)
	}

	flush(t, d.socket)
	got := map[string]int64{}
	rows, err := db.Pool.Query(context.Background(), `SELECT key, total FROM counter_totals`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		got[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range rep.Sent {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if got[k] == rep.Sent[k] {
			continue
		}
		step := "?"
		if parts := strings.SplitN(k, ":", 3); len(parts) >= 2 {
			step = parts[1]
		}
		how := "which passed"
		if e, ok := failed[step]; ok {
			how = "which failed: " + e
		}
		if got[k] > rep.Sent[k] {
			// Nothing else makes PostgreSQL hold more than was sent.
			how += "; more than was sent: the library resent commands the daemon had already counted"
		}
		t.Errorf("%s: PostgreSQL total of %s: got %d; want %d (sent by step %s, %s)",
			name, k, got[k], rep.Sent[k], step, how)
	}
}

// logDaemonTrouble logs the daemon's warnings, errors and connections that
// ended with an error, so a failing step can be matched with them.
func logDaemonTrouble(t *testing.T, d *daemon) {
	t.Helper()
	var lines []string
	for _, line := range strings.Split(d.log(), "\n") {
		ended := strings.Contains(line, `msg="connection ended"`) && !strings.Contains(line, "err=<nil>")
		if ended || strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			lines = append(lines, line)
		}
	}
	if len(lines) > 20 {
		lines = append(lines[:20], fmt.Sprintf("... and %d more", len(lines)-20))
	}
	if len(lines) > 0 {
		t.Logf("counterd warnings, errors and failed connections:\n%s", strings.Join(lines, "\n"))
	}
}

// scriptTimeout bounds one script run: its steps are bounded by 20 s each
// and the 100k pipeline by 90 s, so this only ends a script that hangs.
const scriptTimeout = 5 * time.Minute

// runScript runs a testdata/clients script as `command... script socket
// prefix` and returns the report it printed.
func runScript(t *testing.T, command []string, env []string, script, socket, prefix string) clientReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	args := append(slices.Clone(command[1:]), filepath.Join("testdata", "clients", script), socket, prefix)
	cmd := exec.CommandContext(ctx, command[0], args...)
	cmd.Env = append(os.Environ(), env...)
	// If the test binary dies, the script dies with it.
	cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("%s: no report within %v, killed\nstdout:\n%s\nstderr:\n%s", script, scriptTimeout, stdout.String(), stderr.String())
	}
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	var rep clientReport
	out := bytes.TrimSpace(stdout.Bytes())
	if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%s: report is not JSON: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	return rep
}

// nodeModules returns the directory scripts/clients.sh installs the Node
// libraries into, skipping the test when node or the package is missing.
func nodeModules(t *testing.T, pkg string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		needTool(t, "node not found in PATH: the %s client test needs Node.js 20 or newer", pkg)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", ".cache", "node", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, pkg, "package.json")); err != nil {
		needTool(t, "npm package %s is not installed in %s: run scripts/clients.sh (make test does)", pkg, dir)
	}
	return dir
}

func testNodeClient(t *testing.T, pkg, script string) {
	modules := nodeModules(t, pkg)
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, clientFlushTimeout)
	rep := runScript(t, []string{"node"}, []string{"NODE_PATH=" + modules}, script, d.socket, "t")
	checkReport(t, db, d, rep)
}

func TestClientIORedis(t *testing.T) {
	t.Parallel()
	testNodeClient(t, "ioredis", "ioredis.js")
}

func TestClientNodeRedis(t *testing.T) {
	t.Parallel()
	testNodeClient(t, "redis", "node-redis.js")
}

// pythonWithRedis returns a Python interpreter that can import redis.
// Debian's python3-redis is only visible to the system interpreter, which
// a pyenv or virtualenv python3 first on PATH hides.
func pythonWithRedis(t *testing.T) string {
	t.Helper()
	var found []string
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(p)
		if err != nil || slices.Contains(found, path) {
			continue
		}
		found = append(found, path)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = exec.CommandContext(ctx, path, "-c", "import redis").Run()
		cancel()
		if err == nil {
			return path
		}
	}
	if len(found) == 0 {
		needTool(t, "python3 not found: the redis-py client test needs Python 3 with redis-py (Debian: python3-redis)")
	}
	needTool(t, "none of %v can import redis: install Debian's python3-redis (scripts/clients.sh does, as root)", found)
	return ""
}

func TestClientRedisPy(t *testing.T) {
	t.Parallel()
	python := pythonWithRedis(t)
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, clientFlushTimeout)
	rep := runScript(t, []string{python}, nil, "redis_py.py", d.socket, "t")
	checkReport(t, db, d, rep)
}
