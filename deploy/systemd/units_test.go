package systemd

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/config"
)

// maxExposure is the highest `systemd-analyze security` exposure either
// unit may score. Measured with systemd 252 (Debian 12): 1.2 for both
// ("OK"; what is left is the network, which counterd needs for
// PostgreSQL and /metrics, the host's users and root directory). A unit
// that loses a hardening line scores more.
const maxExposure = 1.3

// unit is a unit file's settings: "Section.Key" to its values in order.
type unit map[string][]string

func (u unit) last(key string) string {
	v := u[key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func readUnit(t *testing.T, name string) unit {
	t.Helper()
	b, err := fs.ReadFile(Files, name)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not Key=Value", name, line)
			}
			u[section+"."+k] = append(u[section+"."+k], v)
		}
	}
	return u
}

// assignment matches a VAR=value line of the settings file, commented
// out or not.
var assignment = regexp.MustCompile(`^(#?)([A-Z][A-Z0-9_]*)=(.*)$`)

// envExample returns the settings file's assignments, commented out or
// not, with their values as systemd reads them.
func envExample(t *testing.T) (names []string, values map[string]string, set map[string]bool) {
	t.Helper()
	b, err := fs.ReadFile(Files, EnvExample)
	if err != nil {
		t.Fatal(err)
	}
	values, set = map[string]string{}, map[string]bool{}
	for line := range strings.Lines(string(b)) {
		m := assignment.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		names = append(names, m[2])
		v := m[3]
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		values[m[2]] = v
		set[m[2]] = m[1] == ""
	}
	return names, values, set
}

// envVars returns the variables cfg's type reads (its env tags) and their
// envDefault values.
func envVars(cfg any) map[string]string {
	vars := map[string]string{}
	rt := reflect.TypeOf(cfg)
	for f := range rt.Fields() {
		tag, ok := f.Tag.Lookup("env")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		vars[name] = f.Tag.Get("envDefault")
	}
	return vars
}

// unitEnv returns the variables a unit's Environment= lines set.
func unitEnv(u unit) map[string]string {
	env := map[string]string{}
	for _, line := range u["Service.Environment"] {
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	return env
}

// TestEnvNamesAreSettings checks that every variable the settings file and
// the units name is one counterd or rollup reads (a misspelt one would be
// silently ignored), and that the file names DATABASE_URL.
func TestEnvNamesAreSettings(t *testing.T) {
	t.Parallel()
	known := envVars(config.Counterd{})
	for k, v := range envVars(config.Rollup{}) {
		known[k] = v
	}
	names, _, _ := envExample(t)
	if !slices.Contains(names, "DATABASE_URL") {
		t.Errorf("%s does not name DATABASE_URL", EnvExample)
	}
	for _, n := range names {
		if _, ok := known[n]; !ok {
			t.Errorf("%s names %s, which neither counterd nor rollup reads", EnvExample, n)
		}
	}
	for _, name := range Units {
		u := readUnit(t, name)
		for n := range unitEnv(u) {
			if _, ok := known[n]; !ok {
				t.Errorf("%s sets %s, which neither counterd nor rollup reads", name, n)
			}
		}
		if got := u.last("Service.EnvironmentFile"); got != EnvFile {
			t.Errorf("%s: EnvironmentFile=%s; want %s", name, got, EnvFile)
		}
		if got := u.last("Service.User"); got != User {
			t.Errorf("%s: User=%s; want %s", name, got, User)
		}
	}
}

// TestEnvExampleLoads loads every setting of the file, its commented-out
// lines too, with the units' Environment= lines under it, as counterd and
// rollup would: each example value is one they accept.
func TestEnvExampleLoads(t *testing.T) {
	t.Parallel()
	_, values, _ := envExample(t)
	var environ []string
	for k, v := range unitEnv(readUnit(t, "counterd.service")) {
		environ = append(environ, k+"="+v)
	}
	for k, v := range values { // later entries win, as EnvironmentFile= does
		environ = append(environ, k+"="+v)
	}
	if _, err := config.Load[config.Counterd](environ); err != nil {
		t.Errorf("counterd refuses %s: %v", EnvExample, err)
	}
	if _, err := config.Load[config.Rollup](environ); err != nil {
		t.Errorf("rollup refuses %s: %v", EnvExample, err)
	}
}

// TestCounterdDirectories checks that the socket and journal counterd is
// told to use are in the directories systemd makes for it, with modes
// counterd accepts (it refuses a directory group or others can write).
func TestCounterdDirectories(t *testing.T) {
	t.Parallel()
	u := readUnit(t, "counterd.service")
	env := unitEnv(u)
	f := func(setting, dirKey, modeKey, base string, wantMode fs.FileMode) {
		t.Helper()
		dir := path.Join(base, u.last("Service."+dirKey))
		if got := env[setting]; !strings.HasPrefix(got, dir+"/") {
			t.Errorf("%s=%s; want a path in %s (%s)", setting, got, dir, dirKey)
		}
		m, err := strconv.ParseUint(u.last("Service."+modeKey), 8, 32)
		if err != nil {
			t.Fatalf("%s: %v", modeKey, err)
		}
		if got := fs.FileMode(m); got != wantMode {
			t.Errorf("%s=%04o; want %04o", modeKey, got, wantMode)
		}
	}
	f("COUNTERD_SOCKET", "RuntimeDirectory", "RuntimeDirectoryMode", "/run", 0o750)
	f("COUNTERD_JOURNAL_DIR", "StateDirectory", "StateDirectoryMode", "/var/lib", 0o700)
	// Group counterd enters /run/counterd: the socket must let it connect.
	if got := env["COUNTERD_SOCKET_MODE"]; got != "0660" {
		t.Errorf("COUNTERD_SOCKET_MODE=%s; want 0660", got)
	}
}

// TestStopTimeout checks that systemd waits for counterd's drain before it
// sends SIGKILL: connections may take COUNTERD_SHUTDOWN_TIMEOUT, the final
// flush retries within it, and returning budget leases may take as long
// again (cmd/counterd closeBudgets); 15 s more for the rest.
func TestStopTimeout(t *testing.T) {
	t.Parallel()
	shutdown := envVars(config.Counterd{})["COUNTERD_SHUTDOWN_TIMEOUT"]
	if shutdown == "" {
		t.Fatal("config.Counterd has no COUNTERD_SHUTDOWN_TIMEOUT default")
	}
	if _, values, set := envExample(t); set["COUNTERD_SHUTDOWN_TIMEOUT"] {
		shutdown = values["COUNTERD_SHUTDOWN_TIMEOUT"]
	}
	d, err := time.ParseDuration(shutdown)
	if err != nil {
		t.Fatal(err)
	}
	u := readUnit(t, "counterd.service")
	stop, err := time.ParseDuration(u.last("Service.TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v", err)
	}
	if want := 2*d + 15*time.Second; stop < want {
		t.Errorf("TimeoutStopSec=%v; want at least %v (COUNTERD_SHUTDOWN_TIMEOUT=%v)", stop, want, d)
	}
	if got := u.last("Service.KillSignal"); got != "SIGTERM" {
		t.Errorf("KillSignal=%s; want SIGTERM (counterd drains on it)", got)
	}
}

// analyze returns the path of systemd-analyze, skipping the test without it.
func analyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd; scripts/test.sh does as root)")
	}
	return p
}

// installRoot returns a directory laid out as the .deb installs the units
// (/lib/systemd/system, /usr/bin/counterd and /usr/bin/rollup, the
// settings file), with the host's own units beside them, which
// systemd-analyze --root needs for the targets they name. The binaries
// are stand-ins: verify only checks that ExecStart= names an executable.
func installRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	var hostUnits string
	for _, d := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		if _, err := os.Stat(filepath.Join(d, "sysinit.target")); err == nil {
			hostUnits = d
			break
		}
	}
	if hostUnits == "" {
		t.Skip("no systemd units on this host (sysinit.target): systemd-analyze --root needs them")
	}
	must(t, os.MkdirAll(filepath.Join(root, "usr/lib/systemd"), 0o755))
	if out, err := exec.Command("cp", "-a", hostUnits, filepath.Join(root, "usr/lib/systemd/system")).CombinedOutput(); err != nil {
		t.Fatalf("copy the host's units: %v\n%s", err, out)
	}
	must(t, os.Symlink("usr/lib", filepath.Join(root, "lib"))) // merged /usr
	must(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	for _, b := range []string{"counterd", "rollup"} {
		must(t, os.WriteFile(filepath.Join(root, "usr/bin", b), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	}
	for _, name := range Units {
		b, err := fs.ReadFile(Files, name)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(root, "lib/systemd/system", name), b, 0o644))
	}
	b, err := fs.ReadFile(Files, EnvExample)
	must(t, err)
	must(t, os.MkdirAll(filepath.Join(root, path.Dir(EnvFile)), 0o755))
	must(t, os.WriteFile(filepath.Join(root, EnvFile), b, 0o600))
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// verify runs systemd-analyze verify on the installed units and returns
// the lines it printed about them (a warning, such as an unknown key, is
// a line with exit status 0).
func verify(t *testing.T, sa, root string) []string {
	t.Helper()
	cmd := exec.Command(sa, append([]string{"verify", "--man=no", "--root=" + root}, Units...)...)
	out, err := cmd.CombinedOutput()
	var ours []string
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if strings.Contains(line, "counterd") || strings.Contains(line, "rollup") {
			ours = append(ours, line)
		} else if line != "" {
			t.Logf("systemd-analyze verify (not about our units): %s", line)
		}
	}
	if err != nil && len(ours) == 0 {
		ours = append(ours, "systemd-analyze verify: "+err.Error()+": "+strings.TrimSpace(string(out)))
	}
	return ours
}

// TestVerify runs systemd-analyze verify on the units as installed: no
// error and no warning about them. A unit with an unknown key must fail
// it, so the check is seen to work.
func TestVerify(t *testing.T) {
	t.Parallel()
	sa := analyze(t)
	root := installRoot(t)
	if lines := verify(t, sa, root); len(lines) > 0 {
		t.Errorf("systemd-analyze verify:\n%s", strings.Join(lines, "\n"))
	}

	broken := filepath.Join(root, "lib/systemd/system/counterd.service")
	b, err := os.ReadFile(broken)
	must(t, err)
	must(t, os.WriteFile(broken, []byte(strings.Replace(string(b), "[Service]\n", "[Service]\nProtectSystm=strict\n", 1)), 0o644))
	if lines := verify(t, sa, root); len(lines) == 0 {
		t.Errorf("systemd-analyze verify said nothing of a unit with a misspelt key")
	}
}

var exposure = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+) (\S+)`)

// TestSecurityExposure reports systemd-analyze security's exposure score
// of each unit and checks it is at most maxExposure.
func TestSecurityExposure(t *testing.T) {
	t.Parallel()
	sa := analyze(t)
	root := installRoot(t)
	for _, name := range Units {
		out, err := exec.Command(sa, "security", "--offline=yes", "--root="+root, name).CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "unrecognized option") {
			t.Skipf("this systemd-analyze cannot review unit files offline (systemd 250 or newer can): %s", strings.TrimSpace(string(out)))
		}
		m := exposure.FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("systemd-analyze security %s printed no exposure level (%v):\n%s", name, err, out)
		}
		score, err := strconv.ParseFloat(m[2], 64)
		must(t, err)
		t.Logf("systemd-analyze security --offline=yes %s: exposure %.1f %s", name, score, m[3])
		if score > maxExposure {
			t.Errorf("%s: exposure %.1f; want at most %.1f. Its findings:\n%s", name, score, maxExposure, out)
		}
	}
}
