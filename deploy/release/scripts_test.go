package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMaintainerScripts runs postinst and prerm with stand-ins for
// getent, adduser, useradd and systemctl that log their arguments, under
// DPKG_ROOT (where the scripts look for /run/systemd/system), with and
// without systemd running.
func TestMaintainerScripts(t *testing.T) {
	t.Parallel()
	sh := lookPath(t, "sh")
	f := func(script string, args []string, userExists, hasAdduser, systemdRunning bool, want string) {
		t.Helper()
		dir := t.TempDir()
		stubs, root, log := filepath.Join(dir, "bin"), filepath.Join(dir, "root"), filepath.Join(dir, "log")
		must(t, os.MkdirAll(stubs, 0o755))
		if systemdRunning {
			must(t, os.MkdirAll(filepath.Join(root, "run/systemd/system"), 0o755))
		}
		stub := func(name, body string) {
			must(t, os.WriteFile(filepath.Join(stubs, name), []byte("#!/bin/sh\necho \""+name+" $*\" >>"+log+"\n"+body), 0o755))
		}
		if userExists {
			stub("getent", "echo counterd:x:999:999::/nonexistent:/usr/sbin/nologin\n")
		} else {
			stub("getent", "exit 2\n")
		}
		if hasAdduser {
			stub("adduser", "")
		}
		stub("useradd", "")
		stub("systemctl", "")
		b, err := scripts.ReadFile(script)
		must(t, err)
		cmd := exec.Command(sh, append([]string{"-c", string(b), script}, args...)...)
		// Only the stubs: a real adduser or systemctl must not be reached
		// (the scripts need nothing else but the shell's builtins).
		cmd.Env = []string{"PATH=" + stubs, "DPKG_ROOT=" + root}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s %v: %v\n%s", script, args, err, out)
			return
		}
		got, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		// getent is logged each time; compare what else ran.
		var ran []string
		for line := range strings.Lines(string(got)) {
			if !strings.HasPrefix(line, "getent ") {
				ran = append(ran, strings.TrimSpace(line))
			}
		}
		if g := strings.Join(ran, "; "); g != want {
			t.Errorf("%s %v (user %v, adduser %v, systemd %v) ran %q; want %q", script, args, userExists, hasAdduser, systemdRunning, g, want)
		}
	}
	const (
		adduser = "adduser --system --group --quiet --home /nonexistent --no-create-home counterd"
		useradd = "useradd --system --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin counterd"
	)
	// A first install: the user is created; systemd, if running, reloads.
	f("postinst.sh", []string{"configure", ""}, false, true, false, adduser)
	f("postinst.sh", []string{"configure", ""}, false, true, true, adduser+"; systemctl daemon-reload")
	f("postinst.sh", []string{"configure", ""}, false, false, false, useradd)
	// An upgrade: the user exists; running units restart on the new binaries.
	f("postinst.sh", []string{"configure", "1.2.2"}, true, true, true, "systemctl daemon-reload; systemctl try-restart counterd.service rollup.service")
	f("postinst.sh", []string{"configure", "1.2.2"}, true, true, false, "")
	f("postinst.sh", []string{"abort-upgrade", "1.2.2"}, true, true, true, "")
	// Removal stops the units; an upgrade's prerm leaves them to postinst.
	f("prerm.sh", []string{"remove"}, true, true, true, "systemctl stop counterd.service rollup.service")
	f("prerm.sh", []string{"remove"}, true, true, false, "")
	f("prerm.sh", []string{"upgrade", "1.2.4"}, true, true, true, "")
}
