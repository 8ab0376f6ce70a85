package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/counterd/counterd/internal/change"
)

const (
	// recordHeaderSize is the payload length and CRC in front of each payload.
	recordHeaderSize = 8
	// maxPayload bounds one record so a corrupt length cannot make recovery
	// allocate gigabytes; a round's Append never comes near it.
	maxPayload = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadPayload means a payload whose CRC matched does not decode exactly.
var errBadPayload = errors.New("payload does not decode")

// appendRecord appends items to buf as one framed version 2 record. An item
// that recovery would refuse is an error, and nothing is appended.
func appendRecord(buf []byte, items []change.Change) ([]byte, error) {
	start := len(buf)
	buf = append(buf, make([]byte, recordHeaderSize)...)
	buf = binary.AppendUvarint(buf, uint64(len(items)))
	for i := range items {
		it := &items[i]
		if err := checkItem(it); err != nil {
			return buf[:start], fmt.Errorf("item %d (key %q): %w", i, it.Key, err)
		}
		buf = append(buf, byte(it.Kind))
		buf = binary.AppendUvarint(buf, uint64(len(it.Key)))
		buf = append(buf, it.Key...)
		buf = binary.AppendVarint(buf, it.Delta)
		buf = binary.AppendUvarint(buf, math.Float64bits(it.Var)) // 1 byte when exact
		buf = binary.AppendVarint(buf, it.Bucket)                 // 1 byte for Total
	}
	payload := buf[start+recordHeaderSize:]
	if len(payload) > maxPayload {
		return buf[:start], fmt.Errorf("record of %d items is %d bytes; the limit is %d", len(items), len(payload), maxPayload)
	}
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, castagnoli))
	return buf, nil
}

// checkItem says what is wrong with an item: what its kind refuses
// (change.Change.Check), or a variance that is not finite and
// non-negative.
func checkItem(c *change.Change) error {
	if err := c.Check(); err != nil {
		return err
	}
	if c.Var < 0 || math.IsNaN(c.Var) || math.IsInf(c.Var, 0) {
		return fmt.Errorf("variance %v is not finite and non-negative", c.Var)
	}
	return nil
}

// item is one decoded item; key is only valid during the callback.
type item struct {
	key      []byte
	kind     change.Kind
	bucket   int64
	delta    int64
	variance float64
}

// decodePayload calls fn for each item in a payload of the given segment
// format version, after checking that the whole payload decodes exactly,
// so fn never sees part of a bad record. Version 1 items become kind
// Total, bucket 0. A well-formed item of a kind this build does not know
// is an error other than errBadPayload: the record was written by a newer
// version, and dropping it would lose data.
func decodePayload(version uint32, payload []byte, fn func(item) error) error {
	if err := walkPayload(version, payload, nil); err != nil {
		return err
	}
	return walkPayload(version, payload, fn)
}

func walkPayload(version uint32, p []byte, fn func(item) error) error {
	count, n := binary.Uvarint(p)
	// Every item takes at least three bytes, and Append never writes zero.
	if n <= 0 || count == 0 || count > uint64(len(p)) {
		return errBadPayload
	}
	p = p[n:]
	for range count {
		var it item
		var err error
		if it, p, err = decodeItem(version, p); err != nil {
			return err
		}
		if fn != nil {
			if err := fn(it); err != nil {
				return err
			}
		}
	}
	if len(p) != 0 {
		return errBadPayload
	}
	return nil
}

// decodeItem decodes the item at the start of p and returns the rest.
// Version 1 items are plain increments (change.Plain), without bucket.
func decodeItem(version uint32, p []byte) (item, []byte, error) {
	it := item{kind: change.Plain()}
	if version >= 2 {
		if len(p) == 0 {
			return it, nil, errBadPayload
		}
		it.kind = change.Kind(p[0])
		if !it.kind.Valid() {
			return it, nil, fmt.Errorf("record holds unknown change kind %d", p[0])
		}
		p = p[1:]
	}
	klen, n := binary.Uvarint(p)
	if n <= 0 || klen > uint64(len(p)-n) {
		return it, nil, errBadPayload
	}
	it.key = p[n : n+int(klen)]
	p = p[n+int(klen):]
	if it.delta, n = binary.Varint(p); n <= 0 {
		return it, nil, errBadPayload
	}
	p = p[n:]
	vbits, n := binary.Uvarint(p)
	if n <= 0 {
		return it, nil, errBadPayload
	}
	it.variance = math.Float64frombits(vbits)
	p = p[n:]
	if version >= 2 {
		if it.bucket, n = binary.Varint(p); n <= 0 {
			return it, nil, errBadPayload
		}
		p = p[n:]
	}
	if checkItem(&change.Change{Kind: it.kind, Bucket: it.bucket, Delta: it.delta, Var: it.variance}) != nil {
		return it, nil, errBadPayload
	}
	return it, p, nil
}
