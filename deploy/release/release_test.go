package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/counterd/counterd/deploy/systemd"
)

// testVersion is what the test stamps: a tag, commits after it and a
// dirty tree, as git describe prints them.
const (
	testVersion    = "v1.2.3-4-gabcdef0-dirty"
	testDebVersion = "1.2.3+4.gabcdef0.dirty"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed", name)
	}
	return p
}

// command runs with LC_ALL=C, so the tools' output is parsed in English.
func command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := command(name, args...).Output()
	if err != nil {
		var stderr []byte
		if e, ok := err.(*exec.ExitError); ok {
			stderr = e.Stderr
		}
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// TestRelease runs scripts/release.sh for linux on this machine's
// architecture only (make release builds all four platforms) and checks
// what it wrote: SHA256SUMS, the archive, the .deb's control fields,
// files, modes, conffiles and scripts, and the --version of the
// cross-built binaries, from the archive and installed from the .deb
// into a scratch root.
func TestRelease(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds counterd and rollup and a .deb (about a minute on 2 cores); not with -short")
	}
	goBin := lookPath(t, "go")
	lookPath(t, "dpkg-deb")
	lookPath(t, "sha256sum")
	arch := runtime.GOARCH
	if arch != "amd64" && arch != "arm64" {
		t.Skipf("releases are built for amd64 and arm64, not %s", arch)
	}
	dist := filepath.Join(t.TempDir(), "dist")
	script, err := filepath.Abs("../../scripts/release.sh")
	must(t, err)
	cmd := command(script)
	cmd.Env = append(cmd.Env, "GO="+goBin, "VERSION="+testVersion, "DIST="+dist, "PLATFORMS=linux/"+arch, "SOURCE_DATE_EPOCH=1700000000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", err, out)
	}

	archive := "counterd_" + testVersion + "_linux_" + arch + ".tar.gz"
	deb := "counterd_" + testDebVersion + "_" + arch + ".deb"
	entries, err := os.ReadDir(dist)
	must(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"SHA256SUMS", deb, archive}; !slices.Equal(names, want) { // ReadDir sorts
		t.Fatalf("dist holds %q; want %q", names, want)
	}
	sums := runIn(t, dist, "sha256sum", "-c", "SHA256SUMS")
	if !strings.Contains(sums, archive+": OK") || !strings.Contains(sums, deb+": OK") {
		t.Errorf("sha256sum -c SHA256SUMS:\n%s", sums)
	}

	t.Run("archive", func(t *testing.T) { checkArchive(t, filepath.Join(dist, archive), arch) })
	t.Run("deb", func(t *testing.T) { checkDeb(t, filepath.Join(dist, deb), arch) })
}

func runIn(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func checkArchive(t *testing.T, path, arch string) {
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	must(t, err)
	top := "counterd_" + testVersion + "_linux_" + arch + "/"
	want := map[string]int64{
		top:                                  0o755,
		top + "counterd":                     0o755,
		top + "rollup":                       0o755,
		top + "README.md":                    0o644,
		top + "systemd/":                     0o755,
		top + "systemd/README.md":            0o644,
		top + "systemd/counterd.service":     0o644,
		top + "systemd/rollup.service":       0o644,
		top + "systemd/counterd.env.example": 0o644,
	}
	if _, err := os.Stat("../../LICENSE"); err == nil {
		want[top+"LICENSE"] = 0o644
	}
	bin := t.TempDir()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		mode, ok := want[h.Name]
		if !ok {
			t.Errorf("archive holds %s, not expected", h.Name)
			continue
		}
		delete(want, h.Name)
		if h.Mode&0o7777 != mode || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mode %04o, uid %d, gid %d; want %04o, 0, 0", h.Name, h.Mode&0o7777, h.Uid, h.Gid, mode)
		}
		if base := filepath.Base(h.Name); base == "counterd" || base == "rollup" {
			b, err := io.ReadAll(tr)
			must(t, err)
			must(t, os.WriteFile(filepath.Join(bin, base), b, 0o755))
		}
	}
	for name := range want {
		t.Errorf("archive lacks %s", name)
	}
	checkBinaries(t, bin)
}

// checkBinaries checks the cross-built binaries in dir: statically linked
// (CGO_ENABLED=0: no interpreter), and --version names the stamped version.
func checkBinaries(t *testing.T, dir string) {
	t.Helper()
	for _, b := range []string{"counterd", "rollup"} {
		path := filepath.Join(dir, b)
		ef, err := elf.Open(path)
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked (has an interpreter); want CGO_ENABLED=0", b)
			}
		}
		ef.Close()
		got := output(t, path, "--version")
		if want := b + " " + testVersion + " (go"; !strings.HasPrefix(got, want) {
			t.Errorf("%s --version = %q; want it to start %q", b, got, want)
		}
	}
}

func checkDeb(t *testing.T, path, arch string) {
	fields := map[string]string{
		"Package":      "counterd",
		"Version":      testDebVersion,
		"Architecture": arch,
		"Section":      "database",
		"Priority":     "optional",
	}
	for k, want := range fields {
		if got := strings.TrimSpace(output(t, "dpkg-deb", "-f", path, k)); got != want {
			t.Errorf("dpkg-deb -f %s = %q; want %q", k, got, want)
		}
	}
	for _, k := range []string{"Maintainer", "Description"} {
		if got := strings.TrimSpace(output(t, "dpkg-deb", "-f", path, k)); got == "" {
			t.Errorf("dpkg-deb -f %s is empty", k)
		}
	}
	if got := strings.TrimSpace(output(t, "dpkg-deb", "-f", path, "Depends")); got != "" {
		t.Errorf("Depends: %s; want none (static binaries)", got)
	}

	// Files and modes (dpkg-deb -c: "-rw------- root/root 1263 date time ./etc/...").
	want := map[string]string{
		"./usr/bin/counterd":                    "-rwxr-xr-x root/root",
		"./usr/bin/rollup":                      "-rwxr-xr-x root/root",
		"./lib/systemd/system/counterd.service": "-rw-r--r-- root/root",
		"./lib/systemd/system/rollup.service":   "-rw-r--r-- root/root",
		"./etc/counterd/counterd.env":           "-rw------- root/root",
		"./etc/counterd/":                       "drwxr-xr-x root/root",
	}
	for line := range strings.Lines(output(t, "dpkg-deb", "-c", path)) {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Errorf("dpkg-deb -c: %q", line)
			continue
		}
		name, got := f[len(f)-1], f[0]+" "+f[1]
		if w, ok := want[name]; ok {
			if got != w {
				t.Errorf("%s: %s; want %s", name, got, w)
			}
			delete(want, name)
		} else if !strings.HasSuffix(name, "/") {
			t.Errorf("the package installs %s, not expected", name)
		}
	}
	for name := range want {
		t.Errorf("the package lacks %s", name)
	}

	control := t.TempDir()
	output(t, "dpkg-deb", "-e", path, control)
	conffiles, err := os.ReadFile(filepath.Join(control, "conffiles"))
	must(t, err)
	if got := string(conffiles); got != systemd.EnvFile+"\n" {
		t.Errorf("conffiles = %q; want %q", got, systemd.EnvFile+"\n")
	}
	for _, s := range []string{"postinst", "prerm"} {
		p := filepath.Join(control, s)
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("control has no %s: %v", s, err)
			continue
		}
		if st.Mode()&0o111 == 0 {
			t.Errorf("%s is mode %v; want executable", s, st.Mode())
		}
		output(t, "sh", "-n", p)
	}

	// Installed into a scratch root (dpkg -x: the files, not the scripts;
	// TestMaintainerScripts runs those).
	root := t.TempDir()
	output(t, "dpkg", "-x", path, root)
	checkBinaries(t, filepath.Join(root, "usr/bin"))
	same := func(installed, embedded string) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(root, installed))
		must(t, err)
		w, err := fs.ReadFile(systemd.Files, embedded)
		must(t, err)
		if !bytes.Equal(got, w) {
			t.Errorf("%s differs from deploy/systemd/%s", installed, embedded)
		}
	}
	for _, u := range systemd.Units {
		same(UnitDir+"/"+u, u)
	}
	same(systemd.EnvFile, systemd.EnvExample)
}
