package image_test

import (
	"archive/tar"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/counterd/counterd/deploy/image"
)

// testVersion is what TestImage stamps, so it can find it in the labels
// and in counterd --version.
const testVersion = "v0.0.0-imagetest"

// repoRoot is the checkout's root: deploy/image is two levels down.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "Makefile")); err != nil {
		t.Fatalf("no Makefile at the checkout's root %s: %v", root, err)
	}
	return root
}

// TestImage builds the image as make image does (the target itself, into a
// temporary BIN), reads it back from the OCI layout it wrote, checks what a
// minimal image promises (a numeric non-root user, no shell, static
// binaries, the labels, the settings), unpacks its root file system with
// go-containerregistry and runs counterd from it as the image's user
// against PostgreSQL (the run subtest, in run_linux_test.go).
func TestImage(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	bin := t.TempDir()

	// Building both binaries on a loaded 2-core machine takes minutes;
	// the bound is only there so a hung build cannot hang the suite, and
	// ends before go test's own deadline so the build is stopped whole
	// (its process group: make, go and the compilers) rather than left
	// running when the test binary panics.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if dl, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Minute))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, "image", "BIN="+bin, "VERSION="+testVersion)
	// A make of its own, not a sub-make of make test's: no inherited
	// flags, jobserver or variable overrides.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "MAKEFLAGS" || k == "MFLAGS" || k == "MAKELEVEL" || k == "MAKEOVERRIDES"
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Logf("make image:\n%s", out)

	img, err := image.ReadLayout(filepath.Join(bin, "image"))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	compressed, unpacked, err := image.Sizes(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image size: %d bytes compressed (%.1f MB), %d bytes unpacked (%.1f MB)",
		compressed, float64(compressed)/1e6, unpacked, float64(unpacked)/1e6)

	t.Run("config", func(t *testing.T) { checkConfig(t, root, img, cf) })
	t.Run("archive", func(t *testing.T) { checkArchive(t, filepath.Join(bin, "image.tar"), img) })

	rootfs := t.TempDir()
	paths := extract(t, img, rootfs)
	t.Run("rootfs", func(t *testing.T) { checkRootfs(t, rootfs, paths) })
	t.Run("run", func(t *testing.T) { runImage(t, rootfs, cf.Config) })
}

// checkConfig checks the image's configuration and media types.
func checkConfig(t *testing.T, root string, img v1.Image, cf *v1.ConfigFile) {
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type: got %s; want %s", mt, types.OCIManifestSchema1)
	}
	c := cf.Config
	uid, gid, ok := strings.Cut(c.User, ":")
	u, uerr := strconv.Atoi(uid)
	_, gerr := strconv.Atoi(gid)
	if !ok || uerr != nil || gerr != nil || u == 0 {
		t.Errorf("User: got %q; want a numeric uid:gid, the uid not 0 (runAsNonRoot needs a number)", c.User)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform: got %s/%s; want linux/<arch>", cf.OS, cf.Architecture)
	}
	if want := []string{image.BinDir + "/counterd"}; !slices.Equal(c.Entrypoint, want) {
		t.Errorf("Entrypoint: got %q; want %q", c.Entrypoint, want)
	}
	if c.WorkingDir != image.StateDir {
		t.Errorf("WorkingDir: got %q; want %q", c.WorkingDir, image.StateDir)
	}
	for _, want := range []string{
		"COUNTERD_SOCKET=" + image.Socket,
		"COUNTERD_JOURNAL_DIR=" + image.JournalDir,
		"COUNTERD_METRICS_ADDR=" + image.MetricsAddr,
	} {
		if !slices.Contains(c.Env, want) {
			t.Errorf("Env %q: missing %s", c.Env, want)
		}
	}
	for _, v := range []string{image.SocketDir, image.StateDir} {
		if _, ok := c.Volumes[v]; !ok {
			t.Errorf("Volumes %v: missing %s", c.Volumes, v)
		}
	}

	want := map[string]string{
		"org.opencontainers.image.title":   "counterd",
		"org.opencontainers.image.version": testVersion,
	}
	if rev, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		want["org.opencontainers.image.revision"] = strings.TrimSpace(string(rev))
	}
	for k, v := range want {
		if got := c.Labels[k]; got != v {
			t.Errorf("label %s: got %q; want %q", k, got, v)
		}
	}
	if c.Labels["org.opencontainers.image.source"] == "" {
		t.Errorf("label org.opencontainers.image.source missing (labels %v)", c.Labels)
	}
	// No LICENSE, no licenses label; once one is added, the Makefile's
	// IMAGE_LICENSES must name it.
	licenses, _ := filepath.Glob(filepath.Join(root, "LICENSE*"))
	if got := c.Labels["org.opencontainers.image.licenses"]; (len(licenses) > 0) != (got != "") {
		t.Errorf("label org.opencontainers.image.licenses = %q with license files %q: set IMAGE_LICENSES in the Makefile to the LICENSE's SPDX expression", got, licenses)
	}
}

// checkArchive checks that the docker-archive tar holds the same image.
func checkArchive(t *testing.T, file string, img v1.Image) {
	a, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.ConfigName()
	if got != want {
		t.Errorf("archive's config: got %s; want the layout's %s", got, want)
	}
}

// extract unpacks img's flattened file system into dir as a container
// runtime would (owners and modes kept: the test runs as root to run
// it) and returns the paths it holds.
func extract(t *testing.T, img v1.Image, dir string) []string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var paths []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("extract: %v", err)
		}
		name := filepath.Clean("/" + h.Name)
		paths = append(paths, name)
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeFile(p, tr)
		default:
			t.Fatalf("extract: %s is of type %q; the image holds only files and directories", name, h.Typeflag)
		}
		if err != nil {
			t.Fatalf("extract: %v", err)
		}
		if err := os.Chmod(p, h.FileInfo().Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return paths
}

func writeFile(p string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkRootfs checks that the image holds the two static binaries, the
// two directories its user writes and, if the build host had one, the CA
// bundle: nothing else, so no shell.
func checkRootfs(t *testing.T, rootfs string, paths []string) {
	want := []string{
		"/etc", "/etc/ssl", "/etc/ssl/certs", image.CACertificates,
		"/run", image.SocketDir,
		"/usr", "/usr/local", image.BinDir, image.BinDir + "/counterd", image.BinDir + "/rollup",
		"/var", "/var/lib", image.StateDir,
	}
	if !slices.Contains(paths, image.CACertificates) {
		want = slices.DeleteFunc(want, func(p string) bool { return strings.HasPrefix(p, "/etc") })
	}
	got := slices.Sorted(slices.Values(paths))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("image files:\n got %q\nwant %q", got, want)
	}
	for _, sh := range []string{"/bin/sh", "/bin/bash", "/bin/busybox", "/usr/bin/sh"} {
		if _, err := os.Lstat(filepath.Join(rootfs, sh)); err == nil {
			t.Errorf("%s exists in the image; it must have no shell", sh)
		}
	}
	for _, d := range []string{image.SocketDir, image.StateDir} {
		fi, err := os.Stat(filepath.Join(rootfs, d))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s is %v; counterd refuses a directory group or others can write", d, fi.Mode())
		}
	}
	for _, name := range []string{"counterd", "rollup"} {
		p := filepath.Join(rootfs, image.BinDir, name)
		f, err := elf.Open(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s has a PT_INTERP program header: dynamically linked, it cannot start in an image without libc", name)
			}
		}
		f.Close()
		// Static, so it runs on the host too: the version make stamped.
		out, err := exec.Command(p, "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), name+" "+testVersion) {
			t.Errorf("%s --version: got %q (%v); want it to start %q", name, out, err, name+" "+testVersion)
		}
	}
}
