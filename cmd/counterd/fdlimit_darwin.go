package main

import "syscall"

// adjustFileLimit lowers lim's soft limit to what the system grants. macOS's
// hard limit is unlimited by default, but it refuses a soft limit above
// kern.maxfilesperproc, as the Go runtime's own raise allows for
// (syscall/rlimit_darwin.go).
func adjustFileLimit(lim *syscall.Rlimit) {
	n, err := syscall.SysctlUint32("kern.maxfilesperproc")
	if err == nil && lim.Cur > uint64(n) {
		lim.Cur = uint64(n)
	}
}
