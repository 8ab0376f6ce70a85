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
// name, stores its path in *binary, runs the tests, removes the build and
// exits with the tests' status. Call it from TestMain.
func Main(m *testing.M, name, pkg string, binary *string) {
	os.Exit(Built(m, name, pkg, binary).Run())
}

// Built is m with a Run that first builds pkg as name into *binary, as
// Main does, and removes the build after the tests: a TestMain that checks
// for leaked goroutines passes it to goleak.VerifyTestMain.
func Built(m interface{ Run() int }, name, pkg string, binary *string) interface{ Run() int } {
	return built{m, name, pkg, binary}
}

type built struct {
	m         interface{ Run() int }
	name, pkg string
	binary    *string
}

func (b built) Run() int {
	dir, err := os.MkdirTemp("", b.name+"-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Others may run it: a test can start it as another user.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*b.binary = filepath.Join(dir, b.name)
	if out, err := exec.Command("go", "build", "-o", *b.binary, b.pkg).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.name, err, out)
		return 1
	}
	return b.m.Run()
}
