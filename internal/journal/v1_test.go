package journal

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/counterd/counterd/internal/change"
)

// appendV1Record appends items to buf as one record of segment format
// version 1, spelled out here rather than shared with the encoder so that
// the old format stays pinned: per item a uvarint key length, the key, a
// zigzag varint delta and the uvarint bits of the variance; no kind, no
// bucket.
func appendV1Record(buf []byte, items []change.Change) []byte {
	var p []byte
	p = binary.AppendUvarint(p, uint64(len(items)))
	for _, it := range items {
		p = binary.AppendUvarint(p, uint64(len(it.Key)))
		p = append(p, it.Key...)
		p = binary.AppendVarint(p, it.Delta)
		p = binary.AppendUvarint(p, math.Float64bits(it.Var))
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(p)))
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
	return append(buf, p...)
}
