package process

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Output runs a program to completion and returns its standard output. The
// program is killed when ctx ends and, on Linux, when this process dies.
// On failure the error carries the end of its standard error.
func Output(ctx context.Context, path string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = sysProcAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 500 {
			msg = "..." + msg[len(msg)-500:]
		}
		return stdout.Bytes(), fmt.Errorf("%s: %w: %s", path, err, msg)
	}
	return stdout.Bytes(), nil
}
