package config

import (
	"fmt"
	"io"
	"slices"

	"github.com/counterd/counterd/internal/version"
)

// Command reads a program's command line: one of verbs (the first when
// there is none). It answers --version and -h itself, printing usage and
// then T's settings, and then says done; -h after a verb too (rollup
// once --help). Anything else is an error that names prog; callers exit
// 2 on it.
func Command[T any](prog, usage string, args []string, stdout io.Writer, verbs ...string) (cmd string, done bool, err error) {
	cmd = verbs[0]
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, version.String(prog))
		return cmd, true, nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		Usage[T](stdout)
		return cmd, true, nil
	}
	if len(args) == 2 && slices.Contains(verbs, cmd) && slices.Contains([]string{"-h", "--help", "help"}, args[1]) {
		fmt.Fprint(stdout, usage)
		Usage[T](stdout)
		return cmd, true, nil
	}
	if len(args) > 1 || !slices.Contains(verbs, cmd) {
		return cmd, true, fmt.Errorf("unknown arguments %q; run %s -h", args, prog)
	}
	return cmd, false, nil
}
