package hll

import "encoding/binary"

// Hash is the sketch element for a member given as bytes: the first 64 bits
// of MurmurHash3 x64_128 with seed 0, exactly what the extension's
// hll_hash_bytea(member) and, for a member that is valid UTF-8 text in a
// UTF-8 database, hll_hash_text(member) return (as a signed bigint; the
// bits are the same).
func Hash(member []byte) uint64 {
	h1, _ := Sum128(member, 0)
	return h1
}

// HashInt64 equals hll_hash_bigint(v): the extension hashes the 8 bytes of
// the integer in the server's byte order, little-endian on x86-64 and
// arm64, the only order this package reproduces.
func HashInt64(v int64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	return Hash(b[:])
}

// HashInt32 equals hll_hash_integer(v) (4 little-endian bytes).
func HashInt32(v int32) uint64 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(v))
	return Hash(b[:])
}

// HashInt16 equals hll_hash_smallint(v) (2 little-endian bytes).
func HashInt16(v int16) uint64 {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], uint16(v))
	return Hash(b[:])
}

// HashBool equals hll_hash_boolean(v) (one byte, 0 or 1).
func HashBool(v bool) uint64 {
	b := [1]byte{0}
	if v {
		b[0] = 1
	}
	return Hash(b[:])
}
