package socket

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dir returns a fresh directory whose paths fit a Unix socket.
func dir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestListenRefusesDirectory(t *testing.T) {
	t.Parallel()
	f := func(name string, setup func(d string) error, want string) {
		t.Helper()
		d := filepath.Join(dir(t), "s")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := setup(d); err != nil {
			t.Skipf("%s: %v", name, err)
		}
		ln, err := Listen(filepath.Join(d, "c.sock"), 0o600)
		if err == nil {
			ln.Close()
			t.Fatalf("%s: Listen succeeded; want an error containing %q", name, want)
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), d) {
			t.Fatalf("%s: got %v; want an error naming %s and containing %q", name, err, d, want)
		}
		if _, err := os.Lstat(filepath.Join(d, "c.sock")); !os.IsNotExist(err) {
			t.Fatalf("%s: socket created in a refused directory (%v)", name, err)
		}
	}
	f("0777", func(d string) error { return os.Chmod(d, 0o777) }, "writable by group or others (mode 0777)")
	f("1777 like /tmp", func(d string) error { return os.Chmod(d, 0o777|os.ModeSticky) }, "writable by group or others (mode 1777)")
	f("0770", func(d string) error { return os.Chmod(d, 0o770) }, "writable by group or others")
	if os.Geteuid() == 0 {
		f("another owner", func(d string) error { return os.Chown(d, 65534, 65534) }, "owned by uid 65534")
	}
}

func TestListenCreatesDirectory(t *testing.T) {
	t.Parallel()
	d := filepath.Join(dir(t), "counterd")
	path := filepath.Join(d, "counterd.sock")
	ln, err := Listen(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for p, want := range map[string]os.FileMode{d: 0o700, path: 0o600, path + ".lock": 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o; want %o", p, got, want)
		}
	}
}

// A live listener's socket is never taken, and after Close the path is
// free again; a stale socket without a lock holder is replaced.
func TestListenLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(dir(t), "c.sock")
	ln, err := Listen(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path, 0o600); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Listen: got %v; want ErrInUse", err)
	}
	if c, err := net.Dial("unix", path); err != nil {
		t.Fatalf("the first listener lost its socket: %v", err)
	} else {
		c.Close()
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ln.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("socket left after Close: %v", err)
	}

	// A crashed daemon leaves its socket but not its lock.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	ln, err = Listen(path, 0o600)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln.Close()

	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path, 0o600); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file: got %v; want 'not a socket'", err)
	}
}

// A socket directory that is a symbolic link another user owns is
// refused without following it, even when it points at a directory
// counterd's user owns (the hijack: the link's owner can later repoint it
// at a directory holding a fake server). A link counterd's user or root
// owns is followed, but every link of the chain is checked.
func TestListenSymlinkedDirectory(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a symbolic link owned by another user (uid 65534)")
	}
	f := func(name string, owners []int, wantErr string) {
		t.Helper()
		base := dir(t)
		real := filepath.Join(base, "real") // the victim's own directory
		if err := os.Mkdir(real, 0o700); err != nil {
			t.Fatal(err)
		}
		// Link i, owned by owners[i], points at link i+1; the last at real.
		target := real
		for i := len(owners) - 1; i >= 0; i-- {
			l := filepath.Join(base, "l"+string(rune('a'+i)))
			if err := os.Symlink(target, l); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(l, owners[i], owners[i]); err != nil {
				t.Fatal(err)
			}
			target = l
		}
		path := filepath.Join(target, "c.sock")
		ln, err := Listen(path, 0o600)
		if wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			ln.Close()
			return
		}
		if err == nil {
			ln.Close()
			t.Errorf("%s: Listen through the link succeeded; want an error containing %q", name, wantErr)
			return
		}
		if !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: got %v; want an error containing %q", name, err, wantErr)
		}
		for _, p := range []string{"c.sock", "c.sock.lock"} {
			if _, err := os.Lstat(filepath.Join(real, p)); !os.IsNotExist(err) {
				t.Errorf("%s: %s created through a refused link (%v)", name, p, err)
			}
		}
	}
	f("link owned by another user", []int{65534}, "is a symbolic link owned by uid 65534")
	f("own link to another user's link", []int{0, 65534}, "is a symbolic link owned by uid 65534")
	f("own link", []int{0}, "")
	f("own link to own link", []int{0, 0}, "")
}
