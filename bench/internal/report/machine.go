package report

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where the numbers were measured.
type Machine struct {
	CPU    string
	Cores  int
	Memory string
	OS     string
	Go     string
	// PostgreSQL and Redis are filled in by the caller, which can ask
	// the servers.
	PostgreSQL string
	Redis      string
}

// DescribeMachine reads the CPU model, memory and OS from /proc and
// /etc/os-release; what it cannot read it reports as unknown.
func DescribeMachine() Machine {
	m := Machine{
		CPU:    "unknown",
		Cores:  runtime.NumCPU(),
		Memory: "unknown",
		OS:     runtime.GOOS + "/" + runtime.GOARCH,
		Go:     runtime.Version(),
	}
	if v, ok := field("/proc/cpuinfo", "model name", ':'); ok {
		m.CPU = v
	}
	if v, ok := field("/proc/meminfo", "MemTotal", ':'); ok {
		if kb, err := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64); err == nil {
			m.Memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
		}
	}
	if v, ok := field("/etc/os-release", "PRETTY_NAME", '='); ok {
		m.OS = strings.Trim(v, `"`) + ", " + runtime.GOARCH
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.OS += ", kernel " + strings.TrimSpace(string(b))
	}
	return m
}

// field returns the value of the first line "name<sep>value" in path.
func field(path, name string, sep byte) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), string(sep))
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
