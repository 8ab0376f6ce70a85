package journal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// damagedDirName is the subdirectory where the originals of repaired
// segments are kept, for a human to look at.
const damagedDirName = "damaged"

// repairSegment replaces damaged segment seq, open as orig, with a copy
// holding header and the good spans of orig, and keeps the original in
// damaged/ under a name ending in this Open's generation, so that repeated
// repairs never collide. The original file is never modified: it is hard
// linked into damaged/ and the copy is renamed over its name, so a crash
// at any point leaves either the original or the copy in place.
//
// A failed repair is only logged, and the damaged segment is left as it
// is: recovering it again gives the same result, and refusing to start
// over it (say, on a full disk) would help no one. It reports whether the
// repair was made.
func repairSegment(dir string, orig *os.File, seq uint64, header []byte, good []span, gen [generationSize]byte, log *slog.Logger, reason string, dropped int64) bool {
	path := filepath.Join(dir, segmentName(seq))
	kept, err := replaceSegment(dir, path, orig, header, good, gen)
	if kept == "" {
		log.Warn("journal segment is damaged; repairing it failed, so it is left as it is",
			slog.String("file", path), slog.String("reason", reason),
			slog.Int64("dropped_bytes", dropped), slog.Any("error", err))
		return false
	}
	attrs := []any{slog.String("file", path), slog.String("reason", reason),
		slog.Int64("dropped_bytes", dropped), slog.String("original", kept)}
	if err != nil {
		// If the rename is lost to power loss, the original is recovered
		// and repaired again.
		attrs = append(attrs, slog.Any("error", err))
	}
	log.Warn("journal segment was damaged; replaced it with its good records", attrs...)
	return true
}

// replaceSegment does the work of repairSegment. It returns where the
// original was kept once the copy has replaced it, "" before; an error
// with kept set means only the final directory fsync failed.
func replaceSegment(dir, path string, orig *os.File, header []byte, good []span, gen [generationSize]byte) (kept string, err error) {
	tmp := path + ".repair"
	if err := writeRepaired(tmp, orig, header, good); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("write repaired copy: %w", err)
	}
	damaged := filepath.Join(dir, damagedDirName)
	if err := os.Mkdir(damaged, 0o700); err == nil {
		if err := syncDir(dir); err != nil {
			os.Remove(tmp)
			return "", err
		}
	} else if !errors.Is(err, fs.ErrExist) {
		os.Remove(tmp)
		return "", fmt.Errorf("create %s: %w", damaged, err)
	}
	aside := filepath.Join(damaged, filepath.Base(path)+"."+generationString(gen))
	if err := os.Link(path, aside); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("keep the original: %w", err)
	}
	if err := syncDir(damaged); err != nil {
		os.Remove(tmp)
		os.Remove(aside)
		return "", fmt.Errorf("keep the original: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		os.Remove(aside)
		return "", fmt.Errorf("replace the original: %w", err)
	}
	return aside, syncDir(dir)
}

// writeRepaired writes header and the spans of orig to a new file at path
// and fsyncs it.
func writeRepaired(path string, orig *os.File, header []byte, good []span) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(header); err != nil {
		f.Close()
		return err
	}
	for _, s := range good {
		if _, err := io.Copy(f, io.NewSectionReader(orig, s.start, s.end-s.start)); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
