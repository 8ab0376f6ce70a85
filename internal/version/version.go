// Package version says which build of counterd and rollup is running.
//
// The one idea: a release sets the version at link time
// (go build -ldflags "-X github.com/counterd/counterd/internal/version.version=v1.2.3");
// any other build reports what the Go toolchain recorded (the module
// version, or the VCS revision of a checkout).
package version

import (
	"fmt"
	"runtime/debug"
)

// version is set by -ldflags -X at release; empty otherwise.
var version string

// String returns the version line for program, such as
// "counterd v1.2.3 (go1.26.0, revision 1a2b3c4d, modified)".
func String(program string) string {
	v := version
	extra := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		extra = bi.GoVersion
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", modified"
				}
			}
		}
		if rev != "" {
			extra += ", revision " + rev[:min(len(rev), 12)] + modified
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if extra == "" {
		return fmt.Sprintf("%s %s", program, v)
	}
	return fmt.Sprintf("%s %s (%s)", program, v, extra)
}
