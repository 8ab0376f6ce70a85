package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/pgtest"
)

// --version prints one line naming the program and needs no settings. A
// plain go build says what it knows (the checkout's revision, or that it
// has none), never "(devel)" as before.
func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		t.Fatalf("counterd --version: %v", err)
	}
	if s := string(out); !strings.HasPrefix(s, "counterd ") || strings.Count(s, "\n") != 1 || strings.Contains(s, "(devel)") {
		t.Fatalf("counterd --version: got %q; want one line starting with counterd, without (devel)", s)
	}
}

// make build stamps git describe --always --dirty into --version, and
// INFO's counterd_version says the same. Before, INFO had a version of its
// own: devel-<revision>, or devel, whatever make build stamped.
func TestVersionFromMakeBuild(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	if out, err := exec.Command("make", "-s", "-C", "../..", "build", "BIN="+dir).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	described, err := exec.Command("git", "-C", "../..", "describe", "--always", "--dirty").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	want := "counterd " + strings.TrimSpace(string(described)) + " ("
	out, err := exec.Command(filepath.Join(dir, "counterd"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), want) {
		t.Fatalf("make build's counterd --version: %q, %v; want it to start %q", out, err, want)
	}

	d := newDaemon(t, pgtest.New(t, pgtest.Options{}))
	d.wrap = []string{"sh", "-c", `exec "$0"`, filepath.Join(dir, "counterd")} // make build's, not the package's
	d.start()
	t.Cleanup(d.kill)
	info, err := client(t, d.socket).Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	wantLine := "counterd_version:" + strings.TrimSpace(string(described)) + "\r\n"
	if !strings.Contains(info, wantLine) {
		t.Fatalf("make build's INFO server:\n%s\nwant the line %q", info, wantLine)
	}
}
