package main

import (
	"testing"

	sysunix "golang.org/x/sys/unix"
)

// lowerFDLimit sets process pid's soft open-file limit to n and returns
// the limits it had. With n = 3 no descriptor can be opened: 0, 1 and 2
// are always open, and a new descriptor takes the lowest free number.
func lowerFDLimit(t *testing.T, pid, n int) sysunix.Rlimit {
	t.Helper()
	var orig sysunix.Rlimit
	if err := sysunix.Prlimit(pid, sysunix.RLIMIT_NOFILE, nil, &orig); err != nil {
		t.Fatalf("read the daemon's open file limit: %v", err)
	}
	if err := sysunix.Prlimit(pid, sysunix.RLIMIT_NOFILE, &sysunix.Rlimit{Cur: uint64(n), Max: orig.Max}, nil); err != nil {
		t.Fatalf("lower the daemon's open file limit: %v", err)
	}
	return orig
}

// restoreFDLimit gives process pid back the limits lowerFDLimit returned.
func restoreFDLimit(pid int, orig sysunix.Rlimit) error {
	return sysunix.Prlimit(pid, sysunix.RLIMIT_NOFILE, &orig, nil)
}
