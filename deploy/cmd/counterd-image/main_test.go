package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestTagSafe: git describe's output becomes a valid image tag.
func TestTagSafe(t *testing.T) {
	t.Parallel()
	f := func(in, want string) {
		t.Helper()
		if got := tagSafe(in); got != want {
			t.Errorf("tagSafe(%q): got %q; want %q", in, got, want)
		}
	}
	f("v1.2.3", "v1.2.3")
	f("v1.2.3-4-gabcdef0-dirty", "v1.2.3-4-gabcdef0-dirty")
	f("a0bf5e5", "a0bf5e5")
	f("feature/x+y", "feature_x_y")
	f("-dirty", "v-dirty")
	f(strings.Repeat("a", 200), strings.Repeat("a", 128))
}

// TestParseTime: -created takes git log's %ct or RFC 3339; empty is the
// epoch, which the labels read as not known.
func TestParseTime(t *testing.T) {
	t.Parallel()
	f := func(in string, want time.Time, wantErr bool) {
		t.Helper()
		got, err := parseTime(in)
		if (err != nil) != wantErr || !got.Equal(want) {
			t.Errorf("parseTime(%q): got %v, %v; want %v (error %v)", in, got, err, want, wantErr)
		}
	}
	f("", time.Unix(0, 0), false)
	f("1764324000", time.Unix(1764324000, 0), false)
	f("2025-11-28T10:00:00Z", time.Date(2025, 11, 28, 10, 0, 0, 0, time.UTC), false)
	f("yesterday", time.Time{}, true)
}

// TestRunRefusesBadArguments: what is required is said, before anything
// is built.
func TestRunRefusesBadArguments(t *testing.T) {
	t.Parallel()
	f := func(args []string, want string) {
		t.Helper()
		err := run(args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("run(%q): got %v; want an error with %q", args, err, want)
		}
	}
	f([]string{"-counterd", "x", "-rollup", "y", "-version", "v1"}, "-layout is required")
	f([]string{"-layout", t.TempDir(), "extra"}, "unexpected arguments")
	f([]string{"-layout", t.TempDir(), "-created", "soon", "-version", "v1"}, "-created")
	f([]string{"-layout", t.TempDir(), "-version", "v1"}, "both required")
}
