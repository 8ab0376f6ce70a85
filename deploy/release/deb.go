// Package release builds counterd's .deb packages with nfpm as a library
// (cmd/counterd-deb is the command scripts/release.sh runs): the two
// binaries, the systemd units of deploy/systemd, the settings file as a
// root-only conffile, and maintainer scripts that create the counterd
// system user and stop the units on removal.
//
// The one idea: the package installs what deploy/systemd's tests check,
// byte for byte (the units and the settings file come from its embedded
// files), under the paths the units name.
package release

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"

	"github.com/counterd/counterd/deploy/systemd"
)

//go:embed postinst.sh prerm.sh
var scripts embed.FS

// Where the package installs things.
const (
	BinDir  = "/usr/bin"
	UnitDir = "/lib/systemd/system"
)

// Deb says what goes into one .deb.
type Deb struct {
	Version  string // as make stamps it (git describe --always --dirty); see DebVersion
	Arch     string // GOARCH: amd64, arm64
	Counterd string // path of the linux/Arch counterd binary
	Rollup   string // and of rollup
	// Maintainer is the Maintainer field, "Name <email>".
	Maintainer string
	// MTime stamps every file (SOURCE_DATE_EPOCH, for a reproducible
	// package); zero means now.
	MTime time.Time
}

// FileName is the package's conventional name,
// counterd_<Debian version>_<Debian arch>.deb.
func (d Deb) FileName() (string, error) {
	info, err := d.info("")
	if err != nil {
		return "", err
	}
	return deb.Default.ConventionalFileName(info), nil
}

// Write writes the package to w. It needs a scratch directory for the
// embedded files (nfpm reads contents from paths), removed before it
// returns.
func (d Deb) Write(w io.Writer) error {
	tmp, err := os.MkdirTemp("", "counterd-deb-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(filepath.Join(tmp, "systemd"), systemd.Files); err != nil {
		return err
	}
	if err := os.CopyFS(filepath.Join(tmp, "scripts"), scripts); err != nil {
		return err
	}
	info, err := d.info(tmp)
	if err != nil {
		return err
	}
	return deb.Default.Package(info, w)
}

// info is the package's nfpm description, its embedded files read from
// dir (written there by Write).
func (d Deb) info(dir string) (*nfpm.Info, error) {
	v, err := DebVersion(d.Version)
	if err != nil {
		return nil, err
	}
	if d.Arch != "amd64" && d.Arch != "arm64" {
		return nil, fmt.Errorf("arch %q: want amd64 or arm64", d.Arch)
	}
	if d.Maintainer == "" {
		return nil, fmt.Errorf("no maintainer")
	}
	for _, b := range []string{d.Counterd, d.Rollup} {
		if dir == "" {
			break // FileName: no files read
		}
		if _, err := os.Stat(b); err != nil {
			return nil, err
		}
	}
	mode := func(m fs.FileMode) *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: m}
	}
	contents := files.Contents{
		{Source: d.Counterd, Destination: BinDir + "/counterd", FileInfo: mode(0o755)},
		{Source: d.Rollup, Destination: BinDir + "/rollup", FileInfo: mode(0o755)},
		{Destination: filepath.Dir(systemd.EnvFile), Type: files.TypeDir, FileInfo: mode(0o755)},
		{
			Source:      filepath.Join(dir, "systemd", systemd.EnvExample),
			Destination: systemd.EnvFile,
			Type:        files.TypeConfigNoReplace, // an edited file survives upgrades
			FileInfo:    mode(0o600),               // it holds the database password
		},
	}
	for _, u := range systemd.Units {
		contents = append(contents, &files.Content{Source: filepath.Join(dir, "systemd", u), Destination: UnitDir + "/" + u, FileInfo: mode(0o644)})
	}
	mtime := d.MTime
	if mtime.IsZero() {
		mtime = time.Now()
	}
	info := &nfpm.Info{
		Name:          "counterd",
		Arch:          d.Arch,
		Platform:      "linux",
		Version:       v,
		VersionSchema: "none", // DebVersion made it a Debian version
		Section:       "database",
		Priority:      "optional",
		Maintainer:    d.Maintainer,
		Homepage:      "https://github.com/counterd/counterd",
		Description: "counts increments from a local socket into PostgreSQL\n" +
			"counterd is a sidecar that takes increments (INCR post:42) over a local\n" +
			"Unix socket in the Redis protocol, journals them and writes them into\n" +
			"PostgreSQL as slotted upserts; rollup folds the slot rows into one row\n" +
			"per key. Set DATABASE_URL in /etc/counterd/counterd.env, then\n" +
			"systemctl enable --now counterd rollup.",
		MTime: mtime,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Umask:    0o022,
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(dir, "scripts", "postinst.sh"),
				PreRemove:   filepath.Join(dir, "scripts", "prerm.sh"),
			},
		},
	}
	return nfpm.WithDefaults(info), nil
}
