package privdir_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/privdir"
)

// The daemon's user and another user. As root the tests play a daemon
// running as uid 65534 (nobody) and an attacker with uid 12345; as
// anyone else, only the cases that need no chown run, with the caller's
// own uid.
const (
	daemonUID   = 65534
	attackerUID = 12345
)

func TestOpen(t *testing.T) {
	t.Parallel()
	root := os.Geteuid() == 0
	uid := os.Geteuid()
	if root {
		uid = daemonUID
	}
	type node struct {
		name  string // relative to the test's base directory
		link  string // target, relative to base; empty: a directory
		file  bool   // a regular file
		mode  os.FileMode
		owner int // -1: uid
	}
	f := func(name string, nodes []node, open string, create bool, want string) {
		t.Helper()
		base := t.TempDir()
		if root {
			// The daemon's user must reach its directories.
			if err := os.Chmod(base, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range nodes {
			p := filepath.Join(base, n.name)
			var err error
			switch {
			case n.link != "":
				err = os.Symlink(filepath.Join(base, n.link), p)
			case n.file:
				err = os.WriteFile(p, nil, 0o600)
			default:
				if err = os.Mkdir(p, 0o700); err == nil {
					err = os.Chmod(p, n.mode)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			owner := n.owner
			if owner == -1 {
				owner = uid
			}
			if owner != os.Geteuid() {
				if !root {
					t.Logf("%s: skipped: needs root to make files owned by uid %d", name, owner)
					return
				}
				if err := os.Lchown(p, owner, owner); err != nil {
					t.Fatal(err)
				}
			}
		}
		path := base + "/" + open // not Join, which would drop a trailing slash
		d, err := privdir.Open("test directory", path, uid, create)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			d.Close()
			return
		}
		if err == nil {
			d.Close()
			t.Errorf("%s: Open succeeded; want an error containing %q", name, want)
			return
		}
		if want == "not exist" {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: got %v; want a not-exist error", name, err)
			}
			return
		}
		var pe *privdir.Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v; want a *privdir.Error containing %q", name, err, want)
		}
	}
	dir := func(name string, mode os.FileMode, owner int) node {
		return node{name: name, mode: mode, owner: owner}
	}
	link := func(name, target string, owner int) node {
		return node{name: name, link: target, owner: owner}
	}
	me := -1

	f("own 0700", []node{dir("d", 0o700, me)}, "d", false, "")
	f("own 0755", []node{dir("d", 0o755, me)}, "d", false, "")
	f("0777", []node{dir("d", 0o777, me)}, "d", false, "is writable by group or others (mode 0777)")
	f("1777", []node{dir("d", 0o777|os.ModeSticky, me)}, "d", false, "is writable by group or others (mode 1777)")
	f("0770", []node{dir("d", 0o770, me)}, "d", false, "is writable by group or others (mode 0770)")
	f("0702", []node{dir("d", 0o702, me)}, "d", false, "is writable by group or others (mode 0702)")
	f("a regular file", []node{{name: "d", file: true, owner: me}}, "d", true, "is not a directory")
	f("missing", nil, "d", false, "not exist")
	// Only the last directory is made; a missing parent is a setting to
	// fix (exit 2), not mkdir's ENOENT (exit 1) as before.
	f("missing parent", nil, "p/d", true, "d cannot be created: its parent ")
	f("another owner", []node{dir("d", 0o700, attackerUID)}, "d", false, "is owned by uid 12345 (mode 0700), not by counterd's uid")
	f("root's directory", []node{dir("d", 0o755, 0)}, "d", false, "is owned by uid 0")

	// The hijack and its variants.
	f("another user's link to my directory", []node{dir("mine", 0o700, me), link("d", "mine", attackerUID)}, "d", true,
		"d is a symbolic link owned by uid 12345")
	f("another user's dangling link", []node{link("d", "nowhere", attackerUID)}, "d", true,
		"is a symbolic link owned by uid 12345")
	f("my link to another user's link", []node{dir("mine", 0o700, me), link("theirs", "mine", attackerUID), link("d", "theirs", me)}, "d", false,
		"theirs is a symbolic link owned by uid 12345")
	f("another user's link, with a trailing slash", []node{dir("mine", 0o700, me), link("d", "mine", attackerUID)}, "d/", false,
		"d is a symbolic link owned by uid 12345")
	f("my link", []node{dir("mine", 0o700, me), link("d", "mine", me)}, "d", false, "")
	f("root's link", []node{dir("mine", 0o700, me), link("d", "mine", 0)}, "d", false, "")
	f("my link to another user's directory", []node{dir("theirs", 0o700, attackerUID), link("d", "theirs", me)}, "d", false,
		"is owned by uid 12345")
	f("my link to an open directory", []node{dir("open", 0o777, me), link("d", "open", me)}, "d", false,
		"is writable by group or others (mode 0777)")
	f("my dangling link", []node{link("d", "nowhere", me)}, "d", true, "not exist")
	f("a loop", []node{link("a", "b", me), link("b", "a", me)}, "a", true, "more than 40 symbolic links")
}

// A directory Open creates is 0700 and found again, and a link another
// user owns is refused without creating anything where it points.
func TestOpenCreates(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	p := filepath.Join(base, "new")
	d, err := privdir.Open("test directory", p, os.Geteuid(), true)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode(); got != os.ModeDir|0o700 {
		t.Errorf("created %s with mode %v; want drwx------", p, got)
	}
	// Opening it again finds what it made.
	d, err = privdir.Open("test directory", p, os.Geteuid(), true)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()

	if os.Geteuid() != 0 {
		t.Skip("needs root to make a link owned by another user (uid 12345)")
	}
	link := filepath.Join(base, "link")
	target := filepath.Join(base, "target")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, attackerUID, attackerUID); err != nil {
		t.Fatal(err)
	}
	if d, err := privdir.Open("test directory", link, 0, true); err == nil {
		d.Close()
		t.Fatal("Open through another user's dangling link succeeded")
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("Open created %s through another user's link (%v)", target, err)
	}
}
