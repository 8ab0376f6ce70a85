//go:build !linux

package main

import (
	"testing"

	sysunix "golang.org/x/sys/unix"
)

// lowerFDLimit skips the test: only Linux can change another process's
// limits (prlimit(2)).
func lowerFDLimit(t *testing.T, _, _ int) sysunix.Rlimit {
	t.Helper()
	t.Skip("lowering a running daemon's open file limit needs Linux's prlimit(2)")
	return sysunix.Rlimit{}
}

// restoreFDLimit is never reached: lowerFDLimit skipped the test.
func restoreFDLimit(int, sysunix.Rlimit) error { return nil }
