package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis reports each reconnection that failed through one logger for
// the whole process, which writes to stderr (and dials on a goroutine of
// its own, with no trace of the caller): tests that kill the daemon under
// load made dozens of such lines in a passing run. quietLogger drops them;
// logTo puts each failed dial in the log of the test whose client made it
// (printed when that test fails, or under -v), and the error itself still
// reaches the command that failed.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// logTo sends c's failed dials to tb's log.
func logTo(tb testing.TB, c *redis.Client) *redis.Client {
	c.AddHook(dialLogHook{tb})
	return c
}

type dialLogHook struct{ tb testing.TB }

func (h dialLogHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			h.tb.Logf("go-redis: dial %s: %v", addr, err)
		}
		return c, err
	}
}

func (h dialLogHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h dialLogHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// recordLog is a test whose log is kept for the test to read.
type recordLog struct {
	testing.TB
	mu  sync.Mutex
	log strings.Builder
}

func (r *recordLog) Logf(format string, v ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.log, format+"\n", v...)
}

// A client that cannot dial the daemon logs the failed attempts to its
// test's log, not to the run's output.
func TestGoRedisLogsToTheTest(t *testing.T) {
	t.Parallel()
	rec := &recordLog{TB: t}
	c := logTo(rec, redis.NewClient(&redis.Options{Network: "unix", Addr: filepath.Join(shortDir(t), "none.sock"), MaxRetries: -1}))
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("PING with no daemon: no error")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.log.String(); !strings.Contains(got, "go-redis: dial ") {
		t.Fatalf("test log: got %q; want go-redis's failed dial", got)
	}
}

// A passing run prints nothing from go-redis: this test binary, run
// again for TestGoRedisLogsToTheTest alone (whose client fails to dial
// five times), prints only the verdict.
func TestGoRedisQuietInPassingRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGoRedisLogsToTheTest$", "-test.count=1").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "PASS" {
		t.Fatalf("the test binary, run for TestGoRedisLogsToTheTest: %v; got output\n%s\nwant only PASS", err, out)
	}
}
