package main

import (
	"os/exec"
	"strings"
	"testing"
)

// --version prints one line naming the program and needs no settings.
func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		t.Fatalf("counterd --version: %v", err)
	}
	if s := string(out); !strings.HasPrefix(s, "counterd ") || strings.Count(s, "\n") != 1 {
		t.Fatalf("counterd --version: got %q; want one line starting with counterd", s)
	}
}
