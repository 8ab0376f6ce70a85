// Package process runs a server under measurement as a child process: it
// starts it, waits for the line of output that says it is ready, keeps the
// first and last lines of its output for error messages, copies every line
// to a log when asked, and stops it with SIGTERM, then SIGKILL. On Linux
// the child also gets SIGKILL if its parent dies, so a crashed benchmark
// never leaves a server behind. It also reads a process's CPU time from
// /proc, for CPU per operation.
package process

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	headLines = 50
	tailLines = 100
)

// Spec says what to run.
type Spec struct {
	// Name is used in messages.
	Name string
	Path string
	Args []string
	// Env is the whole environment of the child.
	Env []string
	// Dir is the working directory ("" for the current one).
	Dir string
	// Ready reports whether a line of output (stdout or stderr) says the
	// server is ready.
	Ready func(line string) bool
	// Timeout bounds the wait for Ready (default 30s).
	Timeout time.Duration
	// Log, when set, receives every line of output (stdout and stderr
	// interleaved as the child wrote them) as it arrives. Nothing writes
	// to it once Start has failed or Stop has returned, so the caller may
	// close it then. After a write error the rest of the output is
	// dropped rather than stall the child; Stop reports the error.
	Log io.Writer
}

// Process is a started child.
type Process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's result, set before exited closes
	done   chan struct{}

	mu   sync.Mutex
	head []string
	tail []string
	// lines counts every line seen, so Output can say what it skipped.
	lines int

	// log is nil without Spec.Log. The reader goroutine writes it; its
	// error is read once done is closed.
	log *logWriter

	stopOnce sync.Once
	stopErr  error
}

// Start runs the program and returns once it printed a ready line. It
// stops the child again if it does not become ready within the timeout
// or ctx ends first.
func Start(ctx context.Context, s Spec) (*Process, error) {
	if s.Timeout <= 0 {
		s.Timeout = 30 * time.Second
	}
	if s.Name == "" {
		s.Name = s.Path
	}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = s.Env
	cmd.Dir = s.Dir
	cmd.SysProcAttr = sysProcAttr()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p := &Process{name: s.Name, cmd: cmd, exited: make(chan struct{}), done: make(chan struct{})}
	var rest io.Writer = io.Discard
	if s.Log != nil {
		p.log = &logWriter{w: s.Log}
		rest = p.log
	}
	ready := make(chan struct{})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			p.keep(line)
			if p.log != nil {
				_, _ = io.WriteString(p.log, line+"\n")
			}
			if s.Ready != nil && s.Ready(line) {
				once.Do(func() { close(ready) })
			}
		}
		// Drain what a too-long line left, so the child never blocks.
		_, _ = io.Copy(rest, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		close(p.exited)
	}()
	timer := time.NewTimer(s.Timeout)
	defer timer.Stop()
	select {
	case <-ready:
		return p, nil
	case <-p.exited:
		<-p.done
		return nil, fmt.Errorf("%s exited before it was ready (%v):\n%s", s.Name, p.err, p.Output())
	case <-timer.C:
		_ = p.Stop(time.Second)
		return nil, fmt.Errorf("%s not ready within %v:\n%s", s.Name, s.Timeout, p.Output())
	case <-ctx.Done():
		_ = p.Stop(time.Second)
		return nil, fmt.Errorf("start %s: %w", s.Name, ctx.Err())
	}
}

func (p *Process) keep(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines++
	if len(p.head) < headLines {
		p.head = append(p.head, line)
		return
	}
	if len(p.tail) == tailLines {
		copy(p.tail, p.tail[1:])
		p.tail = p.tail[:tailLines-1]
	}
	p.tail = append(p.tail, line)
}

// Output returns the first and last lines the child printed.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, l := range p.head {
		b.WriteString(l + "\n")
	}
	if skipped := p.lines - len(p.head) - len(p.tail); skipped > 0 {
		fmt.Fprintf(&b, "... (%d lines)\n", skipped)
	}
	for _, l := range p.tail {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// Find returns the first kept line for which match returns ok, and what
// match made of it.
func (p *Process) Find(match func(line string) (string, bool)) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range append(append([]string(nil), p.head...), p.tail...) {
		if v, ok := match(l); ok {
			return v, true
		}
	}
	return "", false
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the child has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop sends SIGTERM, waits up to grace for the child to exit, then kills
// it. It returns an error if the child had to be killed or exited with a
// failure; calling it again returns the same result.
func (p *Process) Stop(grace time.Duration) error {
	p.stopOnce.Do(func() {
		select {
		case <-p.exited:
			if p.err != nil {
				p.stopErr = fmt.Errorf("%s exited early: %w", p.name, p.err)
			}
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-p.exited:
			if p.err != nil {
				p.stopErr = fmt.Errorf("%s: %w", p.name, p.err)
			}
		case <-timer.C:
			_ = p.cmd.Process.Kill()
			<-p.exited
			p.stopErr = fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.name, grace)
		}
	})
	<-p.done
	if p.log != nil && p.log.err != nil {
		return errors.Join(p.stopErr, fmt.Errorf("%s log: %w", p.name, p.log.err))
	}
	return p.stopErr
}

// logWriter passes writes on until the first error, then drops them and
// remembers that error, so a full disk never blocks the child's output.
type logWriter struct {
	w   io.Writer
	err error
}

func (l *logWriter) Write(b []byte) (int, error) {
	if l.err == nil {
		_, l.err = l.w.Write(b)
	}
	return len(b), nil
}

// ErrNotFound is returned by Lookup for a program that is not installed.
var ErrNotFound = errors.New("not found")

// Lookup returns path when it is set and executable, else the program
// name found on PATH.
func Lookup(path, name string) (string, error) {
	if path == "" {
		path = name
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("%s %w (%v)", path, ErrNotFound, err)
	}
	return p, nil
}
