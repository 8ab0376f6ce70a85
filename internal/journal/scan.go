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

// scan sums every good record into acc. An error is a real failure (I/O,
// a sum overflowing int64, or a kind this build does not know), not
// damage.
func (s *scanner) scan(acc *accumulator) error {
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

// accumulator nets a segment's items per change.ID, in order of first
// appearance so recovery is deterministic.
type accumulator struct {
	index   map[change.ID]int
	changes []change.Change
}

func (a *accumulator) add(it item) error {
	id := change.ID{Key: string(it.key), Kind: it.kind, Bucket: it.bucket}
	if it.kind == change.Set {
		// A Set nets with its key's total: it replaces what came before
		// and later increments add to it (see pending's set.go).
		id.Kind = change.Total
	}
	i, ok := a.index[id]
	if !ok {
		if a.index == nil {
			a.index = make(map[change.ID]int)
		}
		a.index[id] = len(a.changes)
		a.changes = append(a.changes, change.Change{
			Key: id.Key, Kind: it.kind, Bucket: id.Bucket, Delta: it.delta, Var: it.variance,
		})
		a.cancelExpiry(it)
		return nil
	}
	c := &a.changes[i]
	switch it.kind {
	case change.Set:
		c.Kind, c.Delta, c.Var = change.Set, it.delta, it.variance
		a.cancelExpiry(it)
		return nil
	case change.Expire:
		c.Delta = it.delta // the last expiry wins
		return nil
	}
	sum, ok := checkedAdd(c.Delta, it.delta)
	if !ok {
		return fmt.Errorf("sum for key %q (kind %v, bucket %d) overflows int64", id.Key, id.Kind, id.Bucket)
	}
	c.Delta = sum
	c.Var += it.variance
	return nil
}

// cancelExpiry drops an expiry recorded before a Set of the same key:
// SET and DEL remove a key's expiry.
func (a *accumulator) cancelExpiry(it item) {
	if it.kind != change.Set {
		return
	}
	if j, ok := a.index[change.ID{Key: string(it.key), Kind: change.Expire}]; ok {
		a.changes[j].Delta = 0
	}
}
