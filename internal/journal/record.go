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

// appendRecord appends items to buf as one framed record.
func appendRecord(buf []byte, items []change.Change) ([]byte, error) {
	start := len(buf)
	buf = append(buf, make([]byte, recordHeaderSize)...)
	buf = binary.AppendUvarint(buf, uint64(len(items)))
	for _, it := range items {
		buf = binary.AppendUvarint(buf, uint64(len(it.Key)))
		buf = append(buf, it.Key...)
		buf = binary.AppendVarint(buf, it.Delta)
		buf = binary.AppendUvarint(buf, math.Float64bits(it.Var)) // 1 byte when exact
	}
	payload := buf[start+recordHeaderSize:]
	if len(payload) > maxPayload {
		return buf[:start], fmt.Errorf("record of %d items is %d bytes; the limit is %d", len(items), len(payload), maxPayload)
	}
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, castagnoli))
	return buf, nil
}

// decodePayload calls fn for each item in payload, after checking that the
// whole payload decodes exactly, so fn never sees part of a bad record.
// key is only valid during the call.
func decodePayload(payload []byte, fn func(key []byte, delta int64, variance float64) error) error {
	if err := walkPayload(payload, nil); err != nil {
		return err
	}
	return walkPayload(payload, fn)
}

func walkPayload(p []byte, fn func(key []byte, delta int64, variance float64) error) error {
	count, n := binary.Uvarint(p)
	// Every item takes at least three bytes, and Append never writes zero.
	if n <= 0 || count == 0 || count > uint64(len(p)) {
		return errBadPayload
	}
	p = p[n:]
	for range count {
		klen, n := binary.Uvarint(p)
		if n <= 0 || klen > uint64(len(p)-n) {
			return errBadPayload
		}
		key := p[n : n+int(klen)]
		p = p[n+int(klen):]
		delta, n := binary.Varint(p)
		if n <= 0 {
			return errBadPayload
		}
		p = p[n:]
		vbits, n := binary.Uvarint(p)
		variance := math.Float64frombits(vbits)
		if n <= 0 || variance < 0 || math.IsNaN(variance) || math.IsInf(variance, 0) {
			return errBadPayload
		}
		p = p[n:]
		if fn != nil {
			if err := fn(key, delta, variance); err != nil {
				return err
			}
		}
	}
	if len(p) != 0 {
		return errBadPayload
	}
	return nil
}

// checkedAdd returns a+b, or false if that overflows int64.
func checkedAdd(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}
