package socket

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/counterd/counterd/internal/privdir"
)

// ErrInUse means another live process holds the socket's lock.
var ErrInUse = errors.New("another counterd is serving this socket")

// Reservation is a socket path reserved for this process: its directory
// checked and its lock held, but nothing bound yet. counterd takes it before it
// creates anything else, so a bad socket setting leaves nothing behind.
type Reservation struct {
	path string
	f    *os.File // nil once Listen has handed it to the Listener
}

// Reserve checks the socket's directory (creating it 0700 when missing;
// see the package doc) and takes the exclusive lock "<path>.lock" (mode
// 0600) in it. A directory that is not safe is a *privdir.Error; another
// live holder of the lock makes the error wrap ErrInUse.
func Reserve(path string) (*Reservation, error) {
	d, err := privdir.Open("socket directory", filepath.Dir(path), os.Geteuid(), true)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	// Opened relative to the directory just checked, so the lock is in
	// that directory whatever happens to the path meanwhile.
	name := filepath.Base(path) + ".lock"
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path+".lock", err)
	}
	lock := os.NewFile(uintptr(fd), path+".lock")
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("listen %s: %w (it holds %s)", path, ErrInUse, path+".lock")
		}
		return nil, fmt.Errorf("lock %s: %w", path+".lock", err)
	}
	return &Reservation{path: path, f: lock}, nil
}

// Listen removes a stale socket and binds the reserved path with
// permission bits mode. No client can connect before the socket has that
// mode.
// The Listener then holds the lock; on error the Reservation still does.
func (r *Reservation) Listen(mode os.FileMode) (*Listener, error) {
	if r.f == nil {
		return nil, errors.New("BUG: socket.Reservation used after Listen or Close")
	}
	ln, err := bind(r.path, mode)
	if err != nil {
		return nil, err
	}
	l := &Listener{UnixListener: ln, lock: r.f}
	r.f = nil
	return l, nil
}

// Close releases the lock unless Listen handed it on. It is idempotent.
func (r *Reservation) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// Listener is a Unix socket listener that holds the socket's lock. Close
// stops accepting, removes the socket and releases the lock.
type Listener struct {
	*net.UnixListener
	lock *os.File
	once sync.Once
	err  error
}

// Listen is Reserve followed by Reservation.Listen.
func Listen(path string, mode os.FileMode) (*Listener, error) {
	r, err := Reserve(path)
	if err != nil {
		return nil, err
	}
	ln, err := r.Listen(mode)
	if err != nil {
		r.Close()
		return nil, err
	}
	return ln, nil
}

// bind replaces a stale socket and listens. The caller holds the lock.
//
// The socket is bound, then chmod'ed, and only then listens: until
// listen(2) every connect(2) is refused, so the socket is never usable
// with a mode more open than asked. This needs no umask change, which
// would be process-wide and make a directory another goroutine creates
// meanwhile unusable (mode 0600).
func bind(path string, mode os.FileMode) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listen %s: exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	fd, err := streamSocket()
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, os.NewSyscallError("socket", err))
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close() // FileListener works on a duplicate
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, os.NewSyscallError("bind", err))
	}
	ln, err := listen(f, path, mode)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return ln, nil
}

// listen sets the bound socket's mode, then listens on it.
func listen(f *os.File, path string, mode os.FileMode) (*net.UnixListener, error) {
	if err := os.Chmod(path, mode); err != nil {
		return nil, err
	}
	// The kernel caps the backlog at net.core.somaxconn, as Go's own
	// listeners ask.
	if err := unix.Listen(int(f.Fd()), math.MaxInt32); err != nil {
		return nil, os.NewSyscallError("listen", err)
	}
	l, err := net.FileListener(f)
	if err != nil {
		return nil, err
	}
	ln := l.(*net.UnixListener)
	ln.SetUnlinkOnClose(true) // as net.ListenUnix's listeners do
	return ln, nil
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
