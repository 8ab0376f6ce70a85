package socket

import "golang.org/x/sys/unix"

// streamSocket returns a new close-on-exec Unix stream socket, atomically:
// a process the daemon forks never inherits it.
func streamSocket() (int, error) {
	return unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}
