package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	t.Parallel()
	vcs := func(rev, when, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: when}, {Key: "vcs.modified", Value: modified},
		}}
	}
	f := func(stamped string, bi *debug.BuildInfo, want string) {
		t.Helper()
		if got := format("counterd", stamped, bi); got != want {
			t.Errorf("format(%q, %+v): got %q; want %q", stamped, bi, got, want)
		}
	}
	// A go build in a checkout: the revision, dirty or not, and its date.
	f("", vcs("3bb0473ea9876827aee741b269eecbf574fbd5f4", "2026-11-23T21:59:45Z", "false"),
		"counterd devel-3bb0473ea987 (2026-11-23, go1.26.8)")
	f("", vcs("3bb0473ea9876827aee741b269eecbf574fbd5f4", "2026-11-23T21:59:45Z", "true"),
		"counterd devel-3bb0473ea987+dirty (2026-11-23, go1.26.8)")
	// make build's stamp wins over everything.
	f("v1.2.3-4-g3bb0473-dirty", vcs("3bb0473ea9876827aee741b269eecbf574fbd5f4", "2026-11-23T21:59:45Z", "true"),
		"counterd v1.2.3-4-g3bb0473-dirty (go1.26.8)")
	// go install ...@v1.2.3 records the module version.
	f("", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, "counterd v1.2.3 (go1.26.8)")
	// Nothing recorded: say so rather than "(devel)".
	f("", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
		"counterd devel (unknown revision, go1.26.8)")
	f("", nil, "counterd devel")
}

// Not parallel: it sets the package's link-time variable.
func TestString(t *testing.T) {
	if got := String("counterd"); !strings.HasPrefix(got, "counterd ") || strings.Contains(got, "\n") || strings.Contains(got, "(devel)") {
		t.Fatalf("String: got %q; want one line starting with the program, never (devel)", got)
	}
	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3"
	if got := String("rollup"); !strings.HasPrefix(got, "rollup v1.2.3 (") {
		t.Fatalf("String with -ldflags version v1.2.3: got %q; want it to start rollup v1.2.3", got)
	}
	// INFO's counterd_version is the same as --version's.
	if got := Version(); got != "v1.2.3" {
		t.Fatalf("Version with -ldflags version v1.2.3: got %q; want v1.2.3", got)
	}
	version = old
	if v, s := Version(), String("counterd"); !strings.HasPrefix(s, "counterd "+v+" (") && s != "counterd "+v {
		t.Fatalf("Version %q is not the one String %q names", v, s)
	}
}
