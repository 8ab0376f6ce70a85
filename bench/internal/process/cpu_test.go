package process_test

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/process"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	const tail = " S 1 2 2 0 -1 4194560 100 0 0 0 250 75 3 4 20 0 1 0 5 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
	for _, tc := range []struct {
		name, line string
		want       process.Stat
		err        string
	}{
		{name: "plain", line: "42 (redis-server)" + tail,
			want: process.Stat{Pid: 42, PPid: 1, Comm: "redis-server", Own: 3250 * time.Millisecond, Children: 70 * time.Millisecond}},
		{name: "spaces and parentheses in the name", line: "7 (postgres: a (b) c)" + tail,
			want: process.Stat{Pid: 7, PPid: 1, Comm: "postgres: a (b) c", Own: 3250 * time.Millisecond, Children: 70 * time.Millisecond}},
		{name: "trailing newline", line: "9 (x)" + tail + "\n",
			want: process.Stat{Pid: 9, PPid: 1, Comm: "x", Own: 3250 * time.Millisecond, Children: 70 * time.Millisecond}},
		{name: "no comm", line: "9 x S 1", err: "no (comm)"},
		{name: "bad pid", line: "nine (x)" + tail, err: "pid"},
		{name: "short", line: "9 (x) S 1 2 3", err: "fields after comm"},
		{name: "not a number", line: "9 (x) S 1 2 2 0 -1 4194560 100 0 0 0 lots 75 3 4 20", err: "field 14"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := process.ParseStat([]byte(tc.line))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseStat: %v; want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseStat = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestCPUOfAndTree reads real processes: this test binary, and a child
// that exits between two readings, whose time must move into the
// parent's reaped-children share rather than disappear.
func TestCPUOfAndTree(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	self, err := process.CPUOf(os.Getpid())
	if err != nil || self.Pid != os.Getpid() || self.PPid != os.Getppid() {
		t.Fatalf("CPUOf(self) = %+v, %v; want this process", self, err)
	}
	before, err := process.Tree(os.Getpid())
	if err != nil || before < self.Own {
		t.Fatalf("Tree(self) = %v, %v; want at least own %v", before, err, self.Own)
	}
	// A child that burns a little CPU and is waited for.
	if out, err := exec.Command("/bin/sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done").CombinedOutput(); err != nil {
		t.Fatalf("child: %v %s", err, out)
	}
	after, err := process.Tree(os.Getpid())
	if err != nil || after < before {
		t.Fatalf("Tree(self) after a child = %v, %v; want at least %v", after, err, before)
	}
	if _, err := process.CPUOf(1 << 30); err == nil {
		t.Error("CPUOf(no such pid): no error")
	}
}
