package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/counterd/counterd/bench/internal/report"
)

// logTail is how much of counterd.log a failed FLUSH shows.
const logTail = 20

// removeStaleLogs deletes the servers' logs an earlier run left in the
// output directory, so every log beside bench.md comes from this run.
func removeStaleLogs(dir string) error {
	for _, name := range []string{report.CounterdLogFile, report.RedisLogFile, report.RedisAOFLogFile, report.BudgetLogFile, report.UniquesLogFile, report.PeerWorkerLogFile, report.FleetLogFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove stale %s: %w", name, err)
		}
	}
	return nil
}

// createLog creates, or truncates, a server's log in the output directory.
func (b *bench) createLog(name string) (*os.File, error) {
	if err := os.MkdirAll(b.cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", b.cfg.Out, err)
	}
	return os.Create(filepath.Join(b.cfg.Out, name))
}

// showLog writes the last lines of a server's log to stderr.
func (b *bench) showLog(path string, n int) {
	lines, err := lastLines(path, n)
	switch {
	case err != nil:
		b.progress.note(fmt.Sprintf("cannot show the log: %v", err))
	case len(lines) == 0:
		b.progress.note(path + " is empty")
	default:
		b.progress.note(fmt.Sprintf("last %d lines of %s:\n%s", len(lines), path, strings.Join(lines, "\n")))
	}
}

// lastLines returns up to n lines from the end of the file at path. It
// reads at most the last 64 KiB, however long the file.
func lastLines(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(0, st.Size()-64<<10)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	text := strings.TrimSuffix(string(buf), "\n")
	if text == "" {
		return nil, nil
	}
	lines := strings.Split(text, "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // probably cut short by the window
	}
	return lines[max(0, len(lines)-n):], nil
}
