// Package version says which build of counterd and rollup is running.
//
// The one idea: make build stamps the version at link time from
// git describe --always --dirty
// (-ldflags "-X github.com/counterd/counterd/internal/version.version=...");
// any other build reports what the Go toolchain recorded: the module
// version of go install ...@v1.2.3, or the revision and time of the git
// checkout go build ran in.
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version is set by -ldflags -X (make build); empty otherwise.
var version string

// String returns the version line for program, such as
// "counterd v1.2.3 (go1.26.0)" or, for a go build in a checkout,
// "counterd devel-1a2b3c4d5e6f+dirty (2026-11-23, go1.26.0)".
func String(program string) string {
	bi, _ := debug.ReadBuildInfo()
	return format(program, version, bi)
}

// Version returns the version alone, as String names it, such as
// "v1.2.3" or "devel-1a2b3c4d5e6f+dirty": what INFO says as
// counterd_version.
func Version() string {
	bi, _ := debug.ReadBuildInfo()
	v, _ := resolve(version, bi)
	return v
}

// format builds String's line from the link-time version stamped and the
// build info bi (nil when the binary has none).
func format(program, stamped string, bi *debug.BuildInfo) string {
	v, extra := resolve(stamped, bi)
	if bi != nil {
		extra = append(extra, bi.GoVersion)
	}
	if len(extra) == 0 {
		return program + " " + v
	}
	return fmt.Sprintf("%s %s (%s)", program, v, strings.Join(extra, ", "))
}

// resolve returns the version from the link-time stamp, else bi's module
// version, else its VCS revision, and what else the revision says (its
// date).
func resolve(stamped string, bi *debug.BuildInfo) (string, []string) {
	v := stamped
	var extra []string
	if bi != nil {
		if m := bi.Main.Version; v == "" && m != "" && m != "(devel)" {
			v = m
		}
		if v == "" {
			v, extra = fromVCS(bi)
		}
	}
	if v == "" {
		v = "devel"
	}
	return v, extra
}

// fromVCS returns "devel-<revision>[+dirty]" and the commit's date from
// the VCS information go build records in a git checkout, or "devel" and
// "unknown revision" without it (-buildvcs=false, or no git).
func fromVCS(bi *debug.BuildInfo) (string, []string) {
	var rev, when string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel", []string{"unknown revision"}
	}
	v := "devel-" + rev[:min(len(rev), 12)]
	if dirty {
		v += "+dirty"
	}
	if date, _, _ := strings.Cut(when, "T"); date != "" {
		return v, []string{date}
	}
	return v, nil
}
