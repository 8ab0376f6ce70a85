package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildRefusesDynamicBinary: the image has no loader and no libc, so
// a binary built with cgo would fail to start there with a bare "no such
// file or directory"; Build says so instead. /bin/sh stands in for one.
func TestBuildRefusesDynamicBinary(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to stand in for a dynamically linked binary")
	}
	sh, _ = filepath.EvalSymlinks(sh)
	if _, err := checkStatic(sh); err == nil {
		t.Skipf("%s is statically linked here; nothing to refuse", sh)
	}
	_, err = Build(Options{Counterd: sh, Rollup: sh, Version: "v0"})
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Fatalf("Build with %s: got %v; want a dynamically linked error", sh, err)
	}
}

// TestBuildRefusesMissingInputs: a version is required (the labels carry
// it), and so are both binaries; a file that is not ELF is refused.
func TestBuildRefusesMissingInputs(t *testing.T) {
	t.Parallel()
	text := filepath.Join(t.TempDir(), "counterd")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := func(opts Options, want string) {
		t.Helper()
		_, err := Build(opts)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Build(%+v): got %v; want an error with %q", opts, err, want)
		}
	}
	f(Options{Counterd: text, Version: "v0"}, "both required")
	f(Options{Counterd: text, Rollup: text}, "version is required")
	f(Options{Counterd: text, Rollup: text, Version: "v0"}, "a Linux binary is required")
}

// TestLabelsLeaveOutUnknowns: a label with nothing to say is left out,
// not set empty, and the epoch (no commit time) is not a creation date.
func TestLabelsLeaveOutUnknowns(t *testing.T) {
	t.Parallel()
	l := Labels(Options{Version: "v1.2.3"})
	for _, k := range []string{"org.opencontainers.image.revision", "org.opencontainers.image.source", "org.opencontainers.image.licenses", "org.opencontainers.image.created"} {
		if v, ok := l[k]; ok {
			t.Errorf("label %s = %q; want it left out", k, v)
		}
	}
	if got := l["org.opencontainers.image.version"]; got != "v1.2.3" {
		t.Errorf("version label: got %q; want v1.2.3", got)
	}
}
