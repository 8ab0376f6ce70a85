package process

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Output runs a program to completion and returns its standard output. The
// program is killed when ctx ends and, on Linux, when this process dies.
// On failure the error carries the end of its standard error.
func Output(ctx context.Context, path string, args ...string) ([]byte, error) {
	out, _, err := OutputCPU(ctx, path, args...)
	return out, err
}

// OutputCPU is Output that also returns the CPU time (user plus system)
// the program spent, as the kernel reported it when the program exited.
func OutputCPU(ctx context.Context, path string, args ...string) ([]byte, time.Duration, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = sysProcAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 500 {
			msg = "..." + msg[len(msg)-500:]
		}
		return stdout.Bytes(), 0, fmt.Errorf("%s: %w: %s", path, err, msg)
	}
	return stdout.Bytes(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}
