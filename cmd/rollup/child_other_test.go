//go:build !linux

package main

import "syscall"

// diesWithTest returns a unchanged: only Linux has a parent-death signal,
// so elsewhere the test's cleanup is what stops the child.
func diesWithTest(a syscall.SysProcAttr) *syscall.SysProcAttr { return &a }
