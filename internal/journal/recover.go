package journal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/counterd/counterd/internal/change"
)

// Segment is one recovered segment: a round that may not be committed yet.
type Segment struct {
	// Seq is the segment's sequence number, also the round's.
	Seq uint64
	// Generation is that of the Journal that created the segment, from its
	// header; "" for a version 1 segment, which has none.
	Generation string
	// Changes holds the net of every good record per change.ID, in order
	// of first appearance; an ID whose deltas cancel out is present with 0.
	Changes []change.Change
	// Records counts the good records.
	Records int
	// Skipped counts damaged records that were skipped: their framing was
	// intact but their checksum or payload was not.
	Skipped int
	// Bytes is the file size after any repair, header included.
	Bytes int64
	// Truncated counts the bytes of a torn or corrupt tail that was cut
	// off; 0 if there was none. A file shorter than its header counts its
	// whole size here and gets a whole header.
	Truncated int64
}

// recoverSegments reads and validates every segment in dir, in order of
// sequence number, and repairs the damaged ones (see repairSegment). gen
// names the original of a repaired segment kept in damaged/, and is the
// generation written into a header that has to be replaced.
func recoverSegments(dir string, gen [generationSize]byte, log *slog.Logger) ([]Segment, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	var segs []Segment
	var free []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), freeSuffix) && e.Type().IsRegular() {
			free = append(free, e.Name())
			continue
		}
		seq, ok := parseSegmentName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		s, err := recoverSegment(dir, seq, gen, log)
		if errors.Is(err, errRecycled) {
			continue
		}
		if err != nil {
			return nil, err
		}
		segs = append(segs, s)
	}
	if err := removeFree(dir, free); err != nil {
		// Harmless: they are deleted at the next Open.
		log.Warn("journal: removing left over pooled files failed", slog.Any("error", err))
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

// recoverSegment reads one segment file. It never writes to the file: a
// damaged one is replaced by a repaired copy (see repairSegment), and an
// unknown version or kind is an error, because guessing would lose data.
func recoverSegment(dir string, seq uint64, gen [generationSize]byte, log *slog.Logger) (Segment, error) {
	path := filepath.Join(dir, segmentName(seq))
	seg := Segment{Seq: seq}
	f, err := os.Open(path)
	if err != nil {
		return seg, fmt.Errorf("recover segment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return seg, fmt.Errorf("recover segment: %w", err)
	}
	size := st.Size()
	seg.Bytes = size
	br := bufio.NewReaderSize(f, 64<<10)
	h, version, short, err := readSegmentHeader(br, path, size)
	if err != nil {
		return seg, err
	}
	if short {
		return recoverShort(dir, f, seg, gen, log), nil
	}
	if later, ok := recycledHeader(h, version, seq); ok {
		return seg, dropRecycled(dir, f, seq, later, size, gen, log)
	}
	if seg.Generation, err = checkSegmentHeader(h, version, seq); err != nil {
		return seg, fmt.Errorf("recover segment %s: %w", path, err)
	}
	sc := scanner{r: br, version: version, off: int64(len(h)), size: size}
	var acc accumulator
	if err := sc.scan(&acc); err != nil {
		return seg, fmt.Errorf("recover segment %s at offset %d: %w", path, sc.off, err)
	}
	seg.Changes, seg.Records, seg.Skipped = acc.changes, sc.records, sc.skipped
	if sc.damaged() {
		repairScanned(dir, f, h, &sc, gen, log, &seg)
	}
	return seg, nil
}

// readSegmentHeader reads the header of the segment at path, size bytes
// long, from br, and returns it with its version; short says the file
// is shorter than any header it could hold, and then nothing is read past
// its prefix.
func readSegmentHeader(br *bufio.Reader, path string, size int64) (h []byte, version uint32, short bool, err error) {
	h = make([]byte, segmentHeaderSize)
	var hsize int64
	if size >= headerPrefixSize {
		if _, err := io.ReadFull(br, h[:headerPrefixSize]); err != nil {
			return nil, 0, false, fmt.Errorf("recover segment %s: read header: %w", path, err)
		}
		// A short file with a bad magic is a header never fully written;
		// one with the right magic and an unknown version is from a newer
		// counterd, never to be replaced.
		hsize, version, err = headerSize(h)
		if err != nil && (size >= v1HeaderSize || string(h[:4]) == segmentMagic) {
			return nil, 0, false, fmt.Errorf("recover segment %s: %w", path, err)
		}
	}
	if size < v1HeaderSize || size < hsize {
		return nil, 0, true, nil
	}
	if _, err := io.ReadFull(br, h[headerPrefixSize:hsize]); err != nil {
		return nil, 0, false, fmt.Errorf("recover segment %s: read header: %w", path, err)
	}
	return h[:hsize], version, false, nil
}

// recoverShort keeps a segment shorter than its header, f: a crash
// between creating the file and writing its header. It holds no record,
// so it gets a whole header and is kept, which keeps its sequence number
// used and lets the caller Remove it. seg.Bytes is the file's size.
func recoverShort(dir string, f *os.File, seg Segment, gen [generationSize]byte, log *slog.Logger) Segment {
	size := seg.Bytes
	seg.Truncated = size
	gotBytes := repairSegment(dir, f, seg.Seq, segmentHeader(seg.Seq, gen), nil, gen, log,
		fmt.Sprintf("shorter than its header (%d bytes)", size), size)
	if gotBytes {
		seg.Bytes = segmentHeaderSize
		seg.Generation = generationString(gen)
	}
	return seg
}

// repairScanned replaces segment f, whose scan sc found damage, with a
// copy of header h and the good records, and records in seg what was
// cut off and, if the repair was made, the copy's size (seg.Bytes is the
// file's size until then).
func repairScanned(dir string, f *os.File, h []byte, sc *scanner, gen [generationSize]byte, log *slog.Logger, seg *Segment) {
	size := seg.Bytes
	if sc.tailReason != "" {
		seg.Truncated = size - sc.off
	}
	kept := int64(len(h))
	for _, s := range sc.good {
		kept += s.end - s.start
	}
	if repairSegment(dir, f, seg.Seq, h, sc.good, gen, log, sc.reason(), size-kept) {
		seg.Bytes = kept
	}
}
