//go:build !linux

package socket

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// streamSocket returns a new close-on-exec Unix stream socket. Systems
// without SOCK_CLOEXEC (macOS) set the flag after socket(2), under
// syscall.ForkLock as the Go runtime does (net/sys_cloexec.go), so that no
// fork between the two calls can inherit the descriptor.
func streamSocket() (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return -1, err
	}
	unix.CloseOnExec(fd)
	return fd, nil
}
