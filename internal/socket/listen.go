package socket

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// ErrInUse means another live process holds the socket's lock.
var ErrInUse = errors.New("another counterd is serving this socket")

// Listener is a Unix socket listener that holds the socket's lock. Close
// stops accepting, removes the socket and releases the lock.
type Listener struct {
	*net.UnixListener
	lock *os.File
	once sync.Once
	err  error
}

// Listen creates a Unix socket at path with permission bits mode. It
// creates the socket's directory (mode 0700) when missing, refuses a
// directory that group or others can write or that another user owns,
// takes the lock "<path>.lock" (mode 0600), removes a stale socket and
// binds. The socket is created under a umask that already denies what
// mode denies, so it is never briefly more open than asked.
func Listen(path string, mode os.FileMode) (*Listener, error) {
	if err := checkDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("listen %s: %w (it holds %s)", path, ErrInUse, path+".lock")
		}
		return nil, fmt.Errorf("lock %s: %w", path+".lock", err)
	}
	ln, err := bind(path, mode)
	if err != nil {
		lock.Close()
		return nil, err
	}
	return &Listener{UnixListener: ln, lock: lock}, nil
}

// bind replaces a stale socket and listens. The caller holds the lock.
func bind(path string, mode os.FileMode) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listen %s: exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	old := syscall.Umask(int(^mode & 0o777))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return ln, nil
}

// checkDir creates dir 0700 when missing and refuses it when anyone but
// this process's user can write it.
func checkDir(dir string) error {
	switch err := os.Mkdir(dir, 0o700); {
	case err == nil:
		// Mkdir's mode passes through the process umask, which Listen
		// narrows for a moment while it binds; say 0700 outright.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("create socket directory: %w", err)
		}
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("create socket directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("socket directory %s is not a directory", dir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("socket directory %s is writable by group or others (mode %04o), so another user could take the socket; use a directory only counterd's user can write", dir, fi.Mode().Perm()|sticky(fi))
	case !ok:
		return fmt.Errorf("socket directory %s: no owner information", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("socket directory %s is owned by uid %d, not by counterd's uid %d", dir, st.Uid, os.Geteuid())
	}
	return nil
}

func sticky(fi os.FileInfo) os.FileMode {
	if fi.Mode()&os.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}

// Close stops accepting, removes the socket and then releases the lock,
// so a successor never finds a socket it did not create. It is
// idempotent.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.err = l.UnixListener.Close() // unlinks the socket
		if err := l.lock.Close(); err != nil && l.err == nil {
			l.err = fmt.Errorf("release socket lock: %w", err)
		}
	})
	return l.err
}
