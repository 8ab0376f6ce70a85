package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/counterd/counterd/internal/change"
)

// span is a byte range of a segment file.
type span struct{ start, end int64 }

// scanner reads the records after a segment header. A record whose framing
// is plausible but whose checksum or payload is bad is skipped, since its
// length still says where the next one starts; framing that runs past the
// end of the file (or cannot be a record at all) ends the scan as a
// damaged tail.
type scanner struct {
	r       io.Reader
	version uint32
	off     int64 // where the next record starts
	size    int64 // file size, so a torn length never causes a huge read
	buf     []byte

	records    int
	skipped    int
	good       []span // the good records, adjacent ones merged
	skipReason string // why the first skipped record was skipped
	tailReason string // why the scan stopped before size, "" if it did not
}

// scan nets every good record into acc. An error is a real failure (I/O,
// a sum overflowing int64, or a kind this build does not know), not
// damage.
func (s *scanner) scan(acc *accumulator) error {
	err := s.scanRecords(acc)
	acc.finish()
	return err
}

// scanRecords is scan without the final listing of acc's nets.
func (s *scanner) scanRecords(acc *accumulator) error {
	var hdr [recordHeaderSize]byte
	for {
		left := s.size - s.off
		if left == 0 {
			return nil
		}
		if left < recordHeaderSize {
			s.tailReason = "torn record header"
			return nil
		}
		if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
			return readErr(err)
		}
		n := binary.LittleEndian.Uint32(hdr[:])
		if n == 0 || n > maxPayload {
			// Append never writes an empty payload; zeros here are most
			// likely a tail the file system extended but never wrote.
			s.tailReason = fmt.Sprintf("implausible record length %d", n)
			return nil
		}
		if int64(n) > left-recordHeaderSize {
			s.tailReason = "torn record"
			return nil
		}
		if cap(s.buf) < int(n) {
			s.buf = make([]byte, n)
		}
		p := s.buf[:n]
		if _, err := io.ReadFull(s.r, p); err != nil {
			return readErr(err)
		}
		end := s.off + recordHeaderSize + int64(n)
		if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			s.skip("checksum mismatch", end)
			continue
		}
		if err := decodePayload(s.version, p, acc.add); err != nil {
			if errors.Is(err, errBadPayload) {
				s.skip(err.Error(), end)
				continue
			}
			return err
		}
		if k := len(s.good); k > 0 && s.good[k-1].end == s.off {
			s.good[k-1].end = end
		} else {
			s.good = append(s.good, span{s.off, end})
		}
		s.records++
		s.off = end
	}
}

func (s *scanner) skip(reason string, end int64) {
	if s.skipped == 0 {
		s.skipReason = reason
	}
	s.skipped++
	s.off = end
}

// damaged reports whether the scan found anything to repair.
func (s *scanner) damaged() bool { return s.skipped > 0 || s.tailReason != "" }

// reason says what was wrong, for the log.
func (s *scanner) reason() string {
	switch {
	case s.skipped > 0 && s.tailReason != "":
		return fmt.Sprintf("%d damaged records (first: %s) and a damaged tail (%s)", s.skipped, s.skipReason, s.tailReason)
	case s.skipped > 0:
		return fmt.Sprintf("%d damaged records (first: %s)", s.skipped, s.skipReason)
	}
	return "damaged tail: " + s.tailReason
}

// readErr reports a read that fell short of the size Stat gave: the file
// changed under us, which is not damage to repair.
func readErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("file shrank while being read: %w", err)
	}
	return fmt.Errorf("read record: %w", err)
}

// accumulator nets a segment's items per cell with change.Fold, the
// accumulator's own netting, in order of first appearance so recovery is
// deterministic. changes holds the nets once the scan is over.
type accumulator struct {
	index   map[change.ID]int
	ids     []change.ID
	nets    []change.Net
	changes []change.Change
}

func (a *accumulator) add(it item) error {
	ch := change.Change{Key: string(it.key), Kind: it.kind, Bucket: it.bucket, Delta: it.delta, Var: it.variance}
	id := ch.Cell()
	i, ok := a.index[id]
	if !ok {
		if a.index == nil {
			a.index = make(map[change.ID]int)
		}
		i = len(a.nets)
		a.index[id] = i
		a.ids = append(a.ids, id)
		a.nets = append(a.nets, change.Net{})
	}
	if !change.Fold(&a.nets[i], ch, a) {
		return fmt.Errorf("sum for key %q (kind %v, bucket %d) overflows int64", id.Key, id.Kind, id.Bucket)
	}
	return nil
}

// Lookup returns the net of cell id, for change.Fold.
func (a *accumulator) Lookup(id change.ID) *change.Net {
	if i, ok := a.index[id]; ok {
		return &a.nets[i]
	}
	return nil
}

// finish lists the nets as changes.
func (a *accumulator) finish() {
	a.changes = make([]change.Change, len(a.nets))
	for i, n := range a.nets {
		a.changes[i] = n.Change(a.ids[i])
	}
}
