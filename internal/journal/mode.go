package journal

import (
	"fmt"
	"strings"
)

// FsyncMode says when appended records are also fsynced, for safety against
// power loss. Writes always reach the kernel before Append returns, so a
// killed process loses nothing in any mode.
type FsyncMode int

const (
	// FsyncEverySec fsyncs the current segment once a second, if it
	// changed, from a background goroutine. It is the zero value.
	FsyncEverySec FsyncMode = iota
	// FsyncAlways makes WaitDurable block until the record is fsynced;
	// concurrent waiters share one fsync (group commit).
	FsyncAlways
	// FsyncNo never fsyncs; the kernel decides when data reaches the disk.
	FsyncNo
)

// UnmarshalText parses "always", "everysec" or "no", ignoring case.
func (m *FsyncMode) UnmarshalText(b []byte) error {
	switch strings.ToLower(string(b)) {
	case "everysec":
		*m = FsyncEverySec
	case "always":
		*m = FsyncAlways
	case "no":
		*m = FsyncNo
	default:
		return fmt.Errorf("%q is not always, everysec or no", b)
	}
	return nil
}

// String returns the name UnmarshalText accepts.
func (m FsyncMode) String() string {
	switch m {
	case FsyncEverySec:
		return "everysec"
	case FsyncAlways:
		return "always"
	case FsyncNo:
		return "no"
	}
	return fmt.Sprintf("FsyncMode(%d)", int(m))
}
