//go:build !darwin

package main

import "syscall"

// adjustFileLimit leaves lim as it is: the system grants a soft limit up to
// the hard one.
func adjustFileLimit(*syscall.Rlimit) {}
