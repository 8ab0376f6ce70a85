package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
)

// Segment is one recovered segment: a round that may not be committed yet.
type Segment struct {
	// Seq is the segment's sequence number, also the round's.
	Seq uint64
	// Deltas holds the items of every good record, summed per key; a key
	// whose deltas cancel out is present with 0.
	Deltas map[string]int64
	// Vars holds the summed variance of keys with sampled items.
	Vars map[string]float64
	// Records counts the good records.
	Records int
	// Bytes is the file size after any truncation, header included.
	Bytes int64
	// Truncated counts the bytes cut off a torn or corrupt tail; 0 if the
	// segment was clean. A file shorter than its header counts its whole
	// size here and gets its header rewritten.
	Truncated int64
}

// recoverSegments reads, validates and repairs every segment in dir, in
// order of sequence number.
func recoverSegments(dir string, log *slog.Logger) ([]Segment, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	var segs []Segment
	for _, e := range entries {
		seq, ok := parseSegmentName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		s, err := recoverSegment(filepath.Join(dir, e.Name()), seq, log)
		if err != nil {
			return nil, err
		}
		segs = append(segs, s)
	}
	slices.SortFunc(segs, func(a, b Segment) int { return cmpSeq(a.Seq, b.Seq) })
	return segs, nil
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// recoverSegment validates one segment file and cuts off a damaged tail.
func recoverSegment(path string, seq uint64, log *slog.Logger) (Segment, error) {
	seg := Segment{Seq: seq, Deltas: make(map[string]int64), Vars: make(map[string]float64)}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return seg, fmt.Errorf("recover segment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return seg, fmt.Errorf("recover segment: %w", err)
	}
	size := st.Size()
	if size < segmentHeaderSize {
		// A crash between creating the file and writing its header: it
		// holds no record, so give it a whole header and keep it, which
		// keeps its sequence number used and lets the caller Remove it.
		if err := rewriteHeader(f, seq); err != nil {
			return seg, fmt.Errorf("recover segment %s: rewrite short header: %w", path, err)
		}
		log.Warn("journal segment shorter than its header; rewrote the header",
			slog.String("file", path), slog.Int64("size", size))
		seg.Bytes, seg.Truncated = segmentHeaderSize, size
		return seg, nil
	}
	br := bufio.NewReaderSize(f, 64<<10)
	h := make([]byte, segmentHeaderSize)
	if _, err := io.ReadFull(br, h); err != nil {
		return seg, fmt.Errorf("recover segment %s: read header: %w", path, err)
	}
	if err := checkSegmentHeader(h, seq); err != nil {
		return seg, fmt.Errorf("recover segment %s: %w", path, err)
	}
	sc := scanner{r: br, off: segmentHeaderSize, size: size}
	records, reason, err := sc.scan(seg.Deltas, seg.Vars)
	if err != nil {
		return seg, fmt.Errorf("recover segment %s at offset %d: %w", path, sc.off, err)
	}
	seg.Records, seg.Bytes = records, sc.off
	if sc.off == size {
		return seg, nil
	}
	if err := f.Truncate(sc.off); err != nil {
		return seg, fmt.Errorf("recover segment %s: truncate damaged tail: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return seg, fmt.Errorf("recover segment %s: fsync after truncating: %w", path, err)
	}
	seg.Truncated = size - sc.off
	log.Warn("journal segment has a damaged tail; truncated it",
		slog.String("file", path), slog.Int64("offset", sc.off),
		slog.Int64("dropped_bytes", seg.Truncated), slog.String("reason", reason))
	return seg, nil
}

func rewriteHeader(f *os.File, seq uint64) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(segmentHeader(seq), 0); err != nil {
		return err
	}
	return f.Sync()
}

// scanner reads records after a segment header.
type scanner struct {
	r    io.Reader
	off  int64 // end of the last good record
	size int64 // file size, so a torn length never causes a huge read
	buf  []byte
}

// scan sums every good record into deltas and stops at the end of the file
// or at the first damaged record, returning why it stopped early. An error
// is a real failure (I/O, or a sum overflowing int64), not damage.
func (s *scanner) scan(deltas map[string]int64, vars map[string]float64) (records int, damage string, err error) {
	var hdr [recordHeaderSize]byte
	add := func(key []byte, delta int64, variance float64) error {
		sum, ok := checkedAdd(deltas[string(key)], delta)
		if !ok {
			return fmt.Errorf("sum for key %q overflows int64", key)
		}
		deltas[string(key)] = sum
		if variance != 0 {
			vars[string(key)] += variance
		}
		return nil
	}
	for {
		left := s.size - s.off
		if left == 0 {
			return records, "", nil
		}
		if left < recordHeaderSize {
			return records, "torn record header", nil
		}
		if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
			return records, "", readErr(err)
		}
		n := binary.LittleEndian.Uint32(hdr[:])
		if n > maxPayload {
			return records, fmt.Sprintf("absurd record length %d", n), nil
		}
		if int64(n) > left-recordHeaderSize {
			return records, "torn record", nil
		}
		if cap(s.buf) < int(n) {
			s.buf = make([]byte, n)
		}
		p := s.buf[:n]
		if _, err := io.ReadFull(s.r, p); err != nil {
			return records, "", readErr(err)
		}
		if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			return records, "checksum mismatch", nil
		}
		if err := decodePayload(p, add); err != nil {
			if errors.Is(err, errBadPayload) {
				return records, err.Error(), nil
			}
			return records, "", err
		}
		s.off += recordHeaderSize + int64(n)
		records++
	}
}

// readErr reports a read that fell short of the size Stat gave: the file
// changed under us, which is not damage to repair.
func readErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("file shrank while being read: %w", err)
	}
	return fmt.Errorf("read record: %w", err)
}
