package journal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/journal"
)

// A journal directory someone else can write is refused, naming the
// directory and what is wrong with it: whoever can write it can plant
// segments that replay as increments, or delete acknowledged ones.
func TestOpenRefusesUnsafeDirectory(t *testing.T) {
	t.Parallel()
	f := func(name string, setup func(base, dir string) error, want string) {
		t.Helper()
		base := t.TempDir()
		dir := filepath.Join(base, "journal")
		if err := setup(base, dir); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		j, _, err := journal.Open(journal.Options{Dir: dir})
		if err == nil {
			j.Close()
			t.Errorf("%s: Open succeeded; want an error containing %q", name, want)
			return
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: got %v; want an error naming %s and containing %q", name, err, dir, want)
		}
		if _, err := os.Lstat(filepath.Join(dir, "LOCK")); !os.IsNotExist(err) {
			t.Errorf("%s: LOCK created in a refused directory (%v)", name, err)
		}
	}
	mkdir := func(mode os.FileMode) func(_, dir string) error {
		return func(_, dir string) error {
			if err := os.Mkdir(dir, 0o700); err != nil {
				return err
			}
			return os.Chmod(dir, mode) // past the umask
		}
	}
	f("0777", mkdir(0o777), "writable by group or others (mode 0777)")
	f("1777", mkdir(0o777|os.ModeSticky), "writable by group or others (mode 1777)")
	f("0775", mkdir(0o775), "writable by group or others (mode 0775)")
	if os.Geteuid() != 0 {
		t.Log("not root: skipping the cases that need files owned by another user (uid 65534)")
		return
	}
	f("another owner", func(base, dir string) error {
		if err := mkdir(0o700)(base, dir); err != nil {
			return err
		}
		return os.Chown(dir, 65534, 65534)
	}, "owned by uid 65534")
	f("another user's link", func(base, dir string) error {
		own := filepath.Join(base, "own")
		if err := os.Mkdir(own, 0o700); err != nil {
			return err
		}
		if err := os.Symlink(own, dir); err != nil {
			return err
		}
		return os.Lchown(dir, 65534, 65534)
	}, "is a symbolic link owned by uid 65534")
}

// A journal directory counterd creates is 0700, and a link to it that
// counterd's user owns is followed.
func TestOpenDirectoryModes(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "a", "journal")
	j, _, err := journal.Open(journal.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	for _, p := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o700 {
			t.Errorf("%s: mode %04o; want 0700", p, got)
		}
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	j, _, err = journal.Open(journal.Options{Dir: link})
	if err != nil {
		t.Fatalf("Open through a link counterd's user owns: %v", err)
	}
	j.Close()
}
