package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DirID names the journal's directory itself (device and inode), which a
// copy of the directory does not share. The daemon records it with its
// claim on the instance, so a restart in the same directory is told from
// a copy started elsewhere.
func (j *Journal) DirID() string { return j.dirID }

// Binding returns what SaveBinding last saved, or nil if nothing was.
// The daemon keeps there which database the journal's rounds belong to.
func (j *Journal) Binding() ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(j.dir, bindingName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal binding: %w", err)
	}
	return b, nil
}

// SaveBinding durably replaces the binding (see Binding).
func (j *Journal) SaveBinding(b []byte) error {
	if err := saveFile(j.dir, bindingName, b); err != nil {
		return fmt.Errorf("save journal binding: %w", err)
	}
	return nil
}
