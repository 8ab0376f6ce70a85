package main

import "syscall"

// diesWithTest returns a with the child set to be killed when the test
// binary dies, so a failed or killed test leaves no process behind.
func diesWithTest(a syscall.SysProcAttr) *syscall.SysProcAttr {
	a.Pdeathsig = syscall.SIGKILL
	return &a
}
