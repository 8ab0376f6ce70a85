package journal

import (
	"os"
	"path/filepath"

	"github.com/counterd/counterd/internal/privdir"
)

// prepareDir creates dir (0700, with any missing parents) or checks the
// one there: whoever else can write it, or repoint a link to it, can plant
// segments that replay as increments or delete acknowledged ones, so it
// must be the daemon's user's alone (see privdir). A refusal is a
// *privdir.Error.
func prepareDir(dir string) error {
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	d, err := privdir.Open("journal directory", dir, os.Geteuid(), true)
	if err != nil {
		return err
	}
	return d.Close()
}
