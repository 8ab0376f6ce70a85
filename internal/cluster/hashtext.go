package cluster

import (
	"math/bits"
)

// HashText is PostgreSQL's hashtext(text) of s, as int4: the hash PL/Proxy
// routes by (RUN ON hashtext(key)) and a partition's rows are placed by.
// It is PostgreSQL's hash_bytes, Bob Jenkins' lookup3 mixing with
// PostgreSQL's own seed and tail order, over the text's bytes (hashtext
// hashes the bytes when the collation is deterministic, as the default
// one is). The result does not depend on the server's byte order for
// the same input on little-endian machines, which is every platform
// PostgreSQL packages are built for here; the golden test compares it
// with the server's own.
func HashText(s string) int32 {
	n := uint32(len(s))
	a := 0x9e3779b9 + n + 3923095
	b, c := a, a
	for len(s) >= 12 {
		a += le32(s)
		b += le32(s[4:])
		c += le32(s[8:])
		a, b, c = mix(a, b, c)
		s = s[12:]
	}
	// The tail: c's lowest byte is left for the length, so bytes 8-10
	// land one byte up.
	switch len(s) {
	case 11:
		c += uint32(s[10]) << 24
		fallthrough
	case 10:
		c += uint32(s[9]) << 16
		fallthrough
	case 9:
		c += uint32(s[8]) << 8
		fallthrough
	case 8:
		b += le32(s[4:])
		a += le32(s)
	case 7:
		b += uint32(s[6]) << 16
		fallthrough
	case 6:
		b += uint32(s[5]) << 8
		fallthrough
	case 5:
		b += uint32(s[4])
		fallthrough
	case 4:
		a += le32(s)
	case 3:
		a += uint32(s[2]) << 16
		fallthrough
	case 2:
		a += uint32(s[1]) << 8
		fallthrough
	case 1:
		a += uint32(s[0])
	}
	return int32(final(a, b, c))
}

// Partition is the partition of key in a cluster of n partitions (a
// power of two): PL/Proxy's hashtext(key) & (n-1).
func Partition(key string, n int) int {
	return int(HashText(key)) & (n - 1)
}

func le32(s string) uint32 {
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

func mix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	return a, b, c
}

func final(a, b, c uint32) uint32 {
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}
