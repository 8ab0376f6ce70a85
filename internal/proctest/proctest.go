// Package proctest builds a command under test once, so end-to-end tests
// run the real binary as a separate process. Production code never
// imports it.
package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Main builds the package pkg (a path such as "." or "../counterd") as
// name, stores its path in *binary, runs the tests and removes the build.
// Call it from TestMain.
func Main(m *testing.M, name, pkg string, binary *string) {
	dir, err := os.MkdirTemp("", name+"-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Others may run it: a test can start it as another user.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	*binary = filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", *binary, pkg).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
