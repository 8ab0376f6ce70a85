package journal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

const (
	segmentHeaderSize = 16
	segmentVersion    = 1
	segmentMagic      = "CNTJ"
	segmentSuffix     = ".seg"
	segmentNameDigits = 20
)

// segment is the file being appended to.
type segment struct {
	seq  uint64
	f    *os.File
	path string

	// Guarded by Journal.mu.
	size    int64 // bytes written, header included
	records int
	current time.Time // when appends started going here

	// broken says the next Append must move to a fresh segment first: a
	// failed write could not be cut back off, or an fsync failed (after
	// which the kernel may report later fsyncs of the same file as good).
	broken atomic.Bool

	// Guarded by Journal.syncMu.
	synced  int64 // size covered by the last good fsync
	syncErr error // first fsync failure; later fsyncs are not trusted
	closed  bool
}

func segmentName(seq uint64) string {
	return fmt.Sprintf("%0*d%s", segmentNameDigits, seq, segmentSuffix)
}

// parseSegmentName returns the sequence number in a name made by
// segmentName, or false for any other file.
func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != segmentNameDigits {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil
}

func segmentHeader(seq uint64) []byte {
	h := make([]byte, 0, segmentHeaderSize)
	h = append(h, segmentMagic...)
	h = binary.LittleEndian.AppendUint32(h, segmentVersion)
	return binary.LittleEndian.AppendUint64(h, seq)
}

// checkSegmentHeader says what is wrong with h as the header of segment seq.
func checkSegmentHeader(h []byte, seq uint64) error {
	if string(h[:4]) != segmentMagic {
		return fmt.Errorf("bad magic %q; want %q", h[:4], segmentMagic)
	}
	if v := binary.LittleEndian.Uint32(h[4:]); v != segmentVersion {
		return fmt.Errorf("unsupported version %d; want %d", v, segmentVersion)
	}
	if s := binary.LittleEndian.Uint64(h[8:]); s != seq {
		return fmt.Errorf("header says segment %d but the file name says %d", s, seq)
	}
	return nil
}

// createSegment makes a new, empty segment file for appending. Unless
// fsync is off, the header and the directory entry are made durable, so
// a crash cannot leave a segment whose header is garbage.
func createSegment(dir string, seq uint64, mode FsyncMode) (*segment, error) {
	path := filepath.Join(dir, segmentName(seq))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create segment %d: %w", seq, err)
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("create segment %d: %w", seq, err)
	}
	if _, err := f.Write(segmentHeader(seq)); err != nil {
		return fail(err)
	}
	if mode != FsyncNo {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
		if err := syncDir(dir); err != nil {
			return fail(err)
		}
	}
	return &segment{seq: seq, f: f, path: path, size: segmentHeaderSize, synced: segmentHeaderSize}, nil
}
