package privdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxLinks bounds a chain of symbolic links, as the kernel's ELOOP does.
const maxLinks = 40

// Error says why a directory cannot be trusted. It is a problem with a
// setting or the machine, not a transient failure: counterd exits 2.
type Error struct {
	What string // "socket directory", "journal directory"
	Path string // the offending path: the link or the directory
	// Problem says what is wrong, naming the owner and the mode; Fix says
	// what to do.
	Problem, Fix string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s %s; %s", e.What, e.Path, e.Problem, e.Fix)
}

// Open returns the directory at path, opened, after checking that neither
// it nor the path to it can be changed by a user other than uid (see the
// package doc). With create, a missing directory (not its parents) is
// made mode 0700. what names the directory in errors ("socket
// directory"). An *Error reports a directory that is not safe to use.
func Open(what, path string, uid int, create bool) (*os.File, error) {
	// lstat("link/") follows the link: a trailing slash must not slip one
	// past the check.
	path = filepath.Clean(path)
	for range 3 { // a lost race with a concurrent mkdir or rename is retried
		resolved, err := follow(what, path, uid)
		if errors.Is(err, fs.ErrNotExist) && create && resolved == path {
			switch err := os.Mkdir(path, 0o700); {
			case errors.Is(err, fs.ErrExist):
				continue // someone made it first: check what they made
			case errors.Is(err, fs.ErrNotExist):
				// Only the directory itself is made: parents are
				// trusted as configured, so they are the operator's.
				parent := filepath.Dir(path)
				return nil, &Error{
					What:    what,
					Path:    path,
					Problem: fmt.Sprintf("cannot be created: its parent %s does not exist", parent),
					Fix:     fmt.Sprintf("create %s first (counterd creates only the last directory, 0700), or name a path in a directory that exists", parent),
				}
			case err != nil:
				return nil, fmt.Errorf("create %s: %w", what, err)
			}
			d, err := openChecked(what, path, uid, true)
			if errors.Is(err, errChanged) {
				continue
			}
			return d, err
		}
		if err != nil {
			return nil, err
		}
		d, err := openChecked(what, resolved, uid, false)
		if errors.Is(err, errChanged) {
			continue
		}
		return d, err
	}
	return nil, fmt.Errorf("%s %s: keeps changing while counterd checks it", what, path)
}

// errChanged means the path was replaced between lstat and open.
var errChanged = errors.New("changed while checked")

// follow walks the chain of symbolic links at path and returns the path
// it ends at, refusing a link that neither uid nor root owns. When the
// end does not exist it returns that path with an error wrapping
// fs.ErrNotExist.
func follow(what, path string, uid int) (string, error) {
	p := path
	for range maxLinks {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return p, &fs.PathError{Op: what, Path: p, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return p, nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return p, fmt.Errorf("%s: %w", what, err)
		}
		if owner := int(st.Uid); owner != uid && owner != 0 {
			return p, &Error{
				What:    what,
				Path:    p,
				Problem: fmt.Sprintf("is a symbolic link owned by uid %d (to %s), not by counterd's uid %d or root: its owner can repoint it at a directory of their own at any time", owner, target, uid),
				Fix:     fmt.Sprintf("remove it (rm %s; in a sticky directory such as /tmp only its owner or root can), or use a directory that uid %d owns", p, uid),
			}
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = target
	}
	return p, &Error{
		What:    what,
		Path:    path,
		Problem: fmt.Sprintf("is more than %d symbolic links from a directory (a loop?)", maxLinks),
		Fix:     "point it at a directory",
	}
}

// openChecked opens the directory at path without following a link there
// and checks its owner and mode on the descriptor. created says Open just
// made it: its mode is then set to 0700 past the umask.
func openChecked(what, path string, uid int, created bool) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ELOOP:
		return nil, errChanged // a link appeared after follow looked
	case err == unix.ENOTDIR:
		var st unix.Stat_t
		if unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return nil, errChanged
		}
		return nil, &Error{What: what, Path: path, Problem: "is not a directory", Fix: "choose a directory"}
	case err != nil:
		return nil, &fs.PathError{Op: "open " + what, Path: path, Err: err}
	}
	d := os.NewFile(uintptr(fd), path)
	if err := check(what, path, d, uid, created); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func check(what, path string, d *os.File, uid int, created bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	mode := st.Mode & 0o7777
	if created && int(st.Uid) == uid {
		// Mkdir's mode passed through the umask.
		if err := unix.Fchmod(int(d.Fd()), 0o700); err != nil {
			return fmt.Errorf("create %s %s: %w", what, path, err)
		}
		mode = 0o700
	}
	switch {
	case int(st.Uid) != uid:
		return &Error{
			What:    what,
			Path:    path,
			Problem: fmt.Sprintf("is owned by uid %d (mode %04o), not by counterd's uid %d: its owner can replace what counterd keeps in it", st.Uid, mode, uid),
			Fix:     fmt.Sprintf("chown %d %s if it should be counterd's, or name a directory that does not exist yet (counterd creates it 0700)", uid, path),
		}
	case mode&0o022 != 0:
		return &Error{
			What:    what,
			Path:    path,
			Problem: fmt.Sprintf("(owner uid %d) is writable by group or others (mode %04o), so another user could replace what counterd keeps in it", st.Uid, mode),
			Fix:     fmt.Sprintf("chmod 700 %s, or name a directory that does not exist yet (counterd creates it 0700)", path),
		}
	}
	return nil
}
