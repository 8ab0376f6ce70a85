package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// progress writes one status line per measured cell to stderr: rewritten
// in place with \r on a terminal, as plain lines otherwise (logs, CI).
type progress struct {
	w     io.Writer
	tty   bool
	total int
	n     int
	width int // of the last in-place line, to blank it out
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// step announces the next cell.
func (p *progress) step(format string, args ...any) {
	p.n++
	p.line(fmt.Sprintf("[%d/%d] ", p.n, p.total) + fmt.Sprintf(format, args...) + " …")
}

// note says something that is not a cell, such as a set-up step or a
// failure; on a terminal it stays on screen.
func (p *progress) note(msg string) {
	if p.tty {
		p.line(msg)
		fmt.Fprintln(p.w)
		p.width = 0
		return
	}
	fmt.Fprintln(p.w, msg)
}

func (p *progress) line(s string) {
	if !p.tty {
		fmt.Fprintln(p.w, s)
		return
	}
	pad := ""
	if n := len([]rune(s)); n < p.width {
		pad = strings.Repeat(" ", p.width-n)
	}
	fmt.Fprint(p.w, "\r"+s+pad)
	p.width = len([]rune(s))
}

// finish ends an in-place line.
func (p *progress) finish() {
	if p.tty && p.width > 0 {
		fmt.Fprintln(p.w)
		p.width = 0
	}
}
