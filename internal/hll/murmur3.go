package hll

import (
	"encoding/binary"
	"math/bits"
)

// MurmurHash3 x64_128 constants (Austin Appleby's public-domain algorithm).
const (
	murmurC1 = 0x87c37b91114253d5
	murmurC2 = 0x4cf5ad432745937f
)

// Sum128 is MurmurHash3 x64_128 of data with seed: the two 64-bit halves
// (h1, h2) the reference writes to out[0] and out[1] on a little-endian
// machine. The extension's hll_hash_* functions keep h1. A negative SQL
// seed s is uint32(s) here, as the extension's C call converts it.
func Sum128(data []byte, seed uint32) (h1, h2 uint64) {
	h1, h2 = uint64(seed), uint64(seed)
	n := len(data)
	body := n &^ 15
	for i := 0; i < body; i += 16 {
		k1 := binary.LittleEndian.Uint64(data[i:])
		k2 := binary.LittleEndian.Uint64(data[i+8:])

		h1 ^= mixK1(k1)
		h1 = bits.RotateLeft64(h1, 27) + h2
		h1 = h1*5 + 0x52dce729

		h2 ^= mixK2(k2)
		h2 = bits.RotateLeft64(h2, 31) + h1
		h2 = h2*5 + 0x38495ab5
	}

	// The tail (0 to 15 bytes) fills k1 with bytes 0-7 and k2 with bytes
	// 8-14, little-endian, each mixed only when it received a byte.
	tail := data[body:]
	if len(tail) > 8 {
		h2 ^= mixK2(littleEndianPartial(tail[8:]))
	}
	if len(tail) > 0 {
		h1 ^= mixK1(littleEndianPartial(tail[:min(len(tail), 8)]))
	}

	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1 = fmix64(h1)
	h2 = fmix64(h2)
	h1 += h2
	h2 += h1
	return h1, h2
}

func mixK1(k uint64) uint64 {
	k *= murmurC1
	k = bits.RotateLeft64(k, 31)
	return k * murmurC2
}

func mixK2(k uint64) uint64 {
	k *= murmurC2
	k = bits.RotateLeft64(k, 33)
	return k * murmurC1
}

// littleEndianPartial reads up to 8 bytes as a little-endian integer.
func littleEndianPartial(b []byte) uint64 {
	var k uint64
	for i := len(b) - 1; i >= 0; i-- {
		k = k<<8 | uint64(b[i])
	}
	return k
}

// fmix64 is the finalizer that makes every input bit affect every output bit.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
