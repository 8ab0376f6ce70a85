package config

import (
	"fmt"
	"os"
	"strconv"
)

// Mode is a file permission written in octal, as chmod takes it.
type Mode uint32

// UnmarshalText parses an octal permission such as 0600 or 660.
func (m *Mode) UnmarshalText(b []byte) error {
	n, err := strconv.ParseUint(string(b), 8, 32)
	if err != nil || n > 0o777 {
		return fmt.Errorf("%q is not an octal permission mode like 0600", b)
	}
	*m = Mode(n)
	return nil
}

// FileMode returns m as an os.FileMode.
func (m Mode) FileMode() os.FileMode { return os.FileMode(m) }
