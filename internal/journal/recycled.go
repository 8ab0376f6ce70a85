package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
)

// errRecycled is returned by recoverSegment for a pooled file caught
// being reused, which is not a segment; recoverSegments skips it.
var errRecycled = errors.New("a committed segment file being reused")

// recycledHeader reports whether h, the whole header of the file named
// after segment seq, is a good version 2 header of a later segment: the
// header recycleSegment writes into a pooled file before renaming it.
// Only a crash between that write and the rename (or power loss undoing
// the rename) leaves one, and the file's old name is that of a segment
// whose round was committed before it was pooled. Any other mismatch of
// header and name stays an error.
func recycledHeader(h []byte, version uint32, seq uint64) (uint64, bool) {
	if version != segmentVersion {
		return 0, false
	}
	body := h[:segmentHeaderSize-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(h[segmentHeaderSize-4:]) {
		return 0, false
	}
	later := binary.LittleEndian.Uint64(h[8:])
	return later, later > seq
}

// dropRecycled removes a pooled file caught being reused. Its old records
// belong to a committed round. Records after the new header can only be
// there if power loss undid the rename after appends began, and none of
// them was reported durable (fsyncLocked fsyncs the directory first); they
// are kept in damaged/ for a human all the same. It returns errRecycled,
// or an error if the file could not be moved out of the way.
func dropRecycled(dir string, f *os.File, seq, later uint64, size int64, gen [generationSize]byte, log *slog.Logger) error {
	path := filepath.Join(dir, segmentName(seq))
	if size == segmentHeaderSize {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("recover segment %s: remove the unused file prepared as segment %d: %w", path, later, err)
		}
		return errRecycled
	}
	damaged := filepath.Join(dir, damagedDirName)
	if err := os.Mkdir(damaged, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("recover segment %s: %w", path, err)
	}
	aside := filepath.Join(damaged, filepath.Base(path)+"."+generationString(gen))
	if err := os.Rename(path, aside); err != nil {
		return fmt.Errorf("recover segment %s: set aside the file prepared as segment %d: %w", path, later, err)
	}
	log.Warn("journal: a committed segment file being reused as a later segment lost its new name; its records were never reported durable, so it is set aside",
		slog.String("file", path), slog.Uint64("prepared_as", later), slog.Int64("bytes", size), slog.String("original", aside))
	return errRecycled
}
