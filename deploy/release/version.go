package release

import (
	"fmt"
	"regexp"
	"strings"
)

// describe splits what git describe --always --dirty prints: a tag, the
// commits since it and the commit ("-4-g1a2b3c4"), and "-dirty".
var describe = regexp.MustCompile(`^(.*?)(?:-([0-9]+)-g([0-9a-f]+))?(-dirty)?$`)

// hexCommit is an abbreviated commit, what git describe --always prints
// without a tag.
var hexCommit = regexp.MustCompile(`^[0-9a-f]{4,40}$`)

// debVersion is the upstream part of a Debian version without a revision.
var debVersion = regexp.MustCompile(`^[0-9][0-9A-Za-z.+~]*$`)

// DebVersion turns a version as make stamps it (git describe --always
// --dirty) into a Debian package version that sorts the same way:
//
//	v1.2.3                  1.2.3
//	v1.2.3-rc1              1.2.3~rc1           (before 1.2.3)
//	v1.2.3-4-g1a2b3c4       1.2.3+4.g1a2b3c4    (after 1.2.3)
//	v1.2.3-4-g1a2b3c4-dirty 1.2.3+4.g1a2b3c4.dirty
//	1a2b3c4-dirty           0.0.0+g1a2b3c4.dirty (no tag yet)
//
// A Debian version must start with a digit, and a hyphen would split off
// a Debian revision, so neither "v" nor "-" stays.
func DebVersion(v string) (string, error) {
	m := describe.FindStringSubmatch(v)
	if v == "" || m == nil {
		return "", fmt.Errorf("version %q: want what git describe --always --dirty prints, such as v1.2.3", v)
	}
	base, commits, commit, dirty := m[1], m[2], m[3], m[4] != ""
	var extra []string
	switch {
	case hexCommit.MatchString(base) && commits == "":
		extra = append(extra, "g"+base)
		base = "0.0.0"
	case len(base) > 1 && base[0] == 'v' && isDigit(base[1]):
		base = base[1:]
	}
	if !isDigit(base[0]) {
		return "", fmt.Errorf("version %q: a tag must be a number such as v1.2.3 to become a Debian version", v)
	}
	base = strings.ReplaceAll(base, "-", "~")
	if commits != "" {
		extra = append(extra, commits, "g"+commit)
	}
	if dirty {
		extra = append(extra, "dirty")
	}
	if len(extra) > 0 {
		base += "+" + strings.Join(extra, ".")
	}
	if !debVersion.MatchString(base) {
		return "", fmt.Errorf("version %q: %q is not a Debian version (digits, letters, . + ~, starting with a digit)", v, base)
	}
	return base, nil
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }
