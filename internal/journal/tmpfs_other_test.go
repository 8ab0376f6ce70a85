//go:build !linux

package journal_test

import "testing"

// mountTmpfs skips the test: the full-disk tests fill a small tmpfs,
// which only Linux mounts this way.
func mountTmpfs(t *testing.T, _ string) string {
	t.Helper()
	t.Skip("needs a Linux tmpfs to fill")
	return ""
}
