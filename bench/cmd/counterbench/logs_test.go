package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/counterd/counterd/internal/resp"
)

func TestLastLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := func(content string, n int, want ...string) {
		t.Helper()
		path := filepath.Join(dir, "log")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := lastLines(path, n)
		if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("lastLines(%.30q, %d): got %q, %v; want %q", content, n, got, err, want)
		}
	}
	f("", 20)
	f("a\n", 20, "a")
	f("a\nb\nc\n", 2, "b", "c")
	f("a\nb\nc", 2, "b", "c")
	// Past the 64 KiB window the first line read is cut and dropped.
	long := strings.Repeat("x", 70<<10) + "\nend\n"
	f(long, 20, "end")
	if _, err := lastLines(filepath.Join(dir, "missing"), 20); err == nil {
		t.Error("lastLines of a missing file: got nil; want an error")
	}
}

func TestShowLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "counterd.log")
	var lines []string
	for i := range 30 {
		lines = append(lines, "line "+strconv.Itoa(i))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	b := &bench{progress: newProgress(&stderr)}
	b.showLog(path, logTail)
	want := fmt.Sprintf("last 20 lines of %s:\n%s\n", path, strings.Join(lines[10:], "\n"))
	if stderr.String() != want {
		t.Errorf("got %q; want %q", stderr.String(), want)
	}
}

// stallingCounterd answers every command on a Unix socket with the error
// counterd gives when FLUSH times out, and counts the FLUSHes.
func stallingCounterd(t *testing.T) (socket string, flushes *atomic.Int64) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	flushes = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				rd := resp.NewReader(c, 4096)
				for {
					args, ok, err := rd.Next()
					if err != nil {
						return
					}
					if !ok {
						if rd.Fill() != nil {
							return
						}
						continue
					}
					if strings.EqualFold(string(args[0]), "FLUSH") {
						flushes.Add(1)
					}
					if _, err := c.Write([]byte("-ERR flush timed out\r\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return socket, flushes
}

// TestFlushSaysHowLongItWaited: a FLUSH that keeps failing is retried,
// then reported with the whole wait, which becomes the row's note.
func TestFlushSaysHowLongItWaited(t *testing.T) {
	t.Parallel()
	socket, flushes := stallingCounterd(t)
	srv := &counterdServer{socket: socket, ctl: control(socket)}
	defer srv.ctl.Close()
	err := srv.flush(context.Background())
	if err == nil {
		t.Fatal("flush: got nil; want an error")
	}
	if n := flushes.Load(); n != flushTries {
		t.Errorf("%d FLUSHes; want %d", n, flushTries)
	}
	want := regexp.MustCompile(`^FLUSH: gave up after waiting [0-9.]+[µnm]?s in all \(10 tries\): ERR flush timed out$`)
	if note := oneLine(err.Error()); !want.MatchString(note) {
		t.Errorf("note %q; want it to match %s", note, want)
	}
}
