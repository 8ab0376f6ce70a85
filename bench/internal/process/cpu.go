package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ClockTick is the unit of /proc/PID/stat's CPU times. The kernel reports
// them in USER_HZ, which is 100 on every architecture Linux supports
// today; reading sysconf(_SC_CLK_TCK) would need cgo for the same answer.
const ClockTick = 10 * time.Millisecond

// Stat is what CPUOf reads from /proc/PID/stat: the process's own CPU
// time, summed over all its threads, and the CPU time of children it has
// waited for (a server's exited workers).
type Stat struct {
	Pid, PPid int
	// Comm is the command name the kernel shows in parentheses.
	Comm string
	// Own is utime+stime; Children is cutime+cstime.
	Own, Children time.Duration
}

// ParseStat reads one /proc/PID/stat line. The command name may hold
// spaces and parentheses, so fields are counted from its last ')'.
func ParseStat(line []byte) (Stat, error) {
	open, end := bytes.IndexByte(line, '('), bytes.LastIndexByte(line, ')')
	if open < 1 || end < open {
		return Stat{}, fmt.Errorf("proc stat %q: no (comm)", clip(line))
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(line[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("proc stat %q: pid: %w", clip(line), err)
	}
	// After the comm: state(3) ppid(4) ... utime(14) stime(15)
	// cutime(16) cstime(17); f[0] is field 3.
	f := bytes.Fields(line[end+1:])
	if len(f) < 15 {
		return Stat{}, fmt.Errorf("proc stat %q: %d fields after comm; want at least 15", clip(line), len(f))
	}
	var n [5]int64
	for i, field := range []int{4, 14, 15, 16, 17} {
		if n[i], err = strconv.ParseInt(string(f[field-3]), 10, 64); err != nil {
			return Stat{}, fmt.Errorf("proc stat %q: field %d: %w", clip(line), field, err)
		}
	}
	return Stat{
		Pid: pid, PPid: int(n[0]), Comm: string(line[open+1 : end]),
		Own:      time.Duration(n[1]+n[2]) * ClockTick,
		Children: time.Duration(n[3]+n[4]) * ClockTick,
	}, nil
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// ErrNoProc is returned where /proc is not there to read (not Linux).
var ErrNoProc = errors.New("no /proc")

// CPUOf reads /proc/PID/stat.
func CPUOf(pid int) (Stat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return Stat{}, fmt.Errorf("%w: %v", ErrNoProc, err)
		}
		return Stat{}, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	return ParseStat(b)
}

// Tree is the CPU time of a process and its children: the parent's own
// and reaped children's time plus every live child's own. Children that
// exit between two readings move from the second term to the first, so
// the difference of two readings counts them whole.
func Tree(parent int) (time.Duration, error) {
	p, err := CPUOf(parent)
	if err != nil {
		return 0, err
	}
	total := p.Own + p.Children
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoProc, err)
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == parent {
			continue
		}
		s, err := CPUOf(pid)
		if err != nil || s.PPid != parent {
			continue // gone since the listing, or not a child
		}
		total += s.Own
	}
	return total, nil
}
