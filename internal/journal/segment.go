package journal

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

const (
	segmentMagic      = "CNTJ"
	segmentSuffix     = ".seg"
	segmentNameDigits = 20

	// segmentVersion is what new segments are written as; version 1
	// segments (no generation, no kind or bucket per item) are still read.
	segmentVersion = 2
	// segmentHeaderSize is the size of a version 2 header: magic, version,
	// sequence number, generation and a CRC-32C of those.
	segmentHeaderSize = 36
	// v1HeaderSize is the size of a version 1 header: magic, version and
	// sequence number.
	v1HeaderSize = 16
	// headerPrefixSize is the magic and version, which say how long the
	// rest of the header is.
	headerPrefixSize = 8
	generationSize   = 16
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

	// renamed is Journal.renames after the rename that gave a recycled
	// file this segment's name, 0 for a created one: the directory must
	// be fsynced past it before a record here counts as durable.
	renamed uint64

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

// segmentHeader returns the version 2 header of segment seq, created by
// the Journal of generation gen.
func segmentHeader(seq uint64, gen [generationSize]byte) []byte {
	h := make([]byte, 0, segmentHeaderSize)
	h = append(h, segmentMagic...)
	h = binary.LittleEndian.AppendUint32(h, segmentVersion)
	h = binary.LittleEndian.AppendUint64(h, seq)
	h = append(h, gen[:]...)
	return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
}

// headerSize returns the size of the header that prefix (magic and
// version) starts, or says what is wrong with it.
func headerSize(prefix []byte) (int64, uint32, error) {
	if string(prefix[:4]) != segmentMagic {
		return 0, 0, fmt.Errorf("bad magic %q; want %q", prefix[:4], segmentMagic)
	}
	switch v := binary.LittleEndian.Uint32(prefix[4:]); v {
	case 1:
		return v1HeaderSize, v, nil
	case 2:
		return segmentHeaderSize, v, nil
	default:
		return 0, v, fmt.Errorf("unsupported segment format version %d; this build reads 1 and 2", v)
	}
}

// checkSegmentHeader says what is wrong with h, a whole header of the
// version headerSize found, as the header of segment seq. It returns the
// generation, "" for version 1.
func checkSegmentHeader(h []byte, version uint32, seq uint64) (string, error) {
	if s := binary.LittleEndian.Uint64(h[8:]); s != seq {
		return "", fmt.Errorf("header says segment %d but the file name says %d", s, seq)
	}
	if version == 1 {
		return "", nil
	}
	body := h[:segmentHeaderSize-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(h[segmentHeaderSize-4:]) {
		return "", fmt.Errorf("header checksum mismatch")
	}
	return hex.EncodeToString(h[16 : 16+generationSize]), nil
}

// createSegment makes a new, empty segment file for appending. Unless
// fsync is off, the header and the directory entry are made durable, so
// a crash cannot leave a segment whose header is garbage.
func createSegment(dir string, seq uint64, gen [generationSize]byte, mode FsyncMode) (*segment, error) {
	path := filepath.Join(dir, segmentName(seq))
	// Not O_APPEND: Append writes at the segment's size with pwrite, so a
	// recycled file can have its header rewritten in place.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create segment %d: %w", seq, err)
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("create segment %d: %w", seq, err)
	}
	if _, err := f.Write(segmentHeader(seq, gen)); err != nil {
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
