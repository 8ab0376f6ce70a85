package process_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/process"
)

func sh(script string, timeout time.Duration) process.Spec {
	return process.Spec{
		Name: "sh", Path: "/bin/sh", Args: []string{"-c", script},
		Ready:   func(line string) bool { return line == "ready" },
		Timeout: timeout,
	}
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		script   string
		timeout  time.Duration
		startErr string // substring; "" for a successful start
		stopErr  string
	}{
		{"clean", `trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done`, 0, "", ""},
		{"exits early", `echo oops; exit 3`, 0, "oops", ""},
		{"never ready", `exec sleep 60`, 200 * time.Millisecond, "not ready", ""},
		{"ignores SIGTERM", `trap '' TERM; echo ready; exec sleep 60`, 0, "", "killed"},
		{"fails on SIGTERM", `trap 'exit 4' TERM; echo ready; while :; do sleep 0.05; done`, 0, "", "exit status 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := process.Start(context.Background(), sh(tc.script, tc.timeout))
			if tc.startErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.startErr) {
					t.Fatalf("Start: %v; want an error containing %q", err, tc.startErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = p.Stop(300 * time.Millisecond)
			if (tc.stopErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.stopErr)) {
				t.Fatalf("Stop: %v; want %q", err, tc.stopErr)
			}
			select {
			case <-p.Exited():
			default:
				t.Fatal("Stop returned while the child runs")
			}
			if err2 := p.Stop(time.Second); err2 != err && err2.Error() != err.Error() {
				t.Fatalf("second Stop: %v; want %v", err2, err)
			}
		})
	}
}

func TestOutputKeepsHeadAndTail(t *testing.T) {
	t.Parallel()
	p, err := process.Start(context.Background(), sh(`seq 1 500; echo addr=127.0.0.1:99; echo ready; exec sleep 60`, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	out := p.Output()
	for _, want := range []string{"1\n2\n", "... (", "\n500\n", "ready\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\n200\n") {
		t.Errorf("output keeps line 200; want it skipped")
	}
	addr, ok := p.Find(func(l string) (string, bool) { return strings.CutPrefix(l, "addr=") })
	if !ok || addr != "127.0.0.1:99" {
		t.Fatalf("Find: %q, %v; want 127.0.0.1:99", addr, ok)
	}
}

func TestCancelledStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := process.Start(ctx, sh(`exec sleep 60`, time.Minute)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a cancelled context: %v; want context.Canceled", err)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	if p, err := process.Lookup("", "sh"); err != nil || p == "" {
		t.Fatalf("Lookup sh: %q, %v", p, err)
	}
	if _, err := process.Lookup("/nonexistent/redis-server", "redis-server"); !errors.Is(err, process.ErrNotFound) {
		t.Fatalf("Lookup of a missing path: %v; want ErrNotFound", err)
	}
}

func TestOutput(t *testing.T) {
	t.Parallel()
	out, err := process.Output(context.Background(), "/bin/sh", "-c", "echo hello; echo noise >&2")
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("Output: %q, %v; want hello", out, err)
	}
	_, err = process.Output(context.Background(), "/bin/sh", "-c", "echo why >&2; exit 2")
	if err == nil || !strings.Contains(err.Error(), "why") {
		t.Fatalf("failing Output: %v; want an error carrying its stderr", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := process.Output(ctx, "/bin/sh", "-c", "exec sleep 60"); err == nil {
		t.Fatal("Output past its context: got nil; want an error")
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestLog(t *testing.T) {
	t.Parallel()
	f := func(name, script string, log io.Writer, wantStop string) {
		t.Helper()
		s := sh(script, 0)
		s.Log = log
		p, err := process.Start(context.Background(), s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err = p.Stop(10 * time.Second)
		if (wantStop == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), wantStop)) {
			t.Fatalf("%s: Stop: %v; want %q", name, err, wantStop)
		}
	}
	// Everything is printed before "ready" but the last words, which come
	// on SIGTERM without a newline.
	const idle = `; while :; do sleep 0.05; done`
	var log bytes.Buffer
	f("both streams", `trap 'printf bye; exit 0' TERM; echo out; echo err >&2; seq 1 300; echo ready`+idle, &log, "")
	// Stop has returned, so nothing writes to log any more.
	want := "out\nerr\n"
	for i := 1; i <= 300; i++ {
		want += strconv.Itoa(i) + "\n"
	}
	want += "ready\nbye\n"
	if got := log.String(); got != want {
		t.Errorf("log: got %d bytes ending %q; want %d ending %q", len(got), got[max(0, len(got)-20):], len(want), want[len(want)-20:])
	}
	// A log that fails never holds the child up: it still gets ready
	// after writing more than a pipe holds.
	f("failing log", `trap 'exit 0' TERM; seq 1 20000; echo ready`+idle, failingWriter{}, "sh log: disk full")
}
