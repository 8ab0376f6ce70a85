package hll

import (
	"strings"
	"testing"
)

func TestSum128(t *testing.T) {
	t.Parallel()
	f := func(in string, seed uint32, want1, want2 uint64) {
		t.Helper()
		h1, h2 := Sum128([]byte(in), seed)
		if h1 != want1 || h2 != want2 {
			t.Errorf("Sum128(%q, %d) = %016x %016x; want %016x %016x", in, seed, h1, h2, want1, want2)
		}
	}
	// The reference implementation's published outputs.
	f("", 0, 0, 0)
	f("hello", 0, 0xcbd8a7b341bd9b02, 0x5b1e906a48ae1d19)
	f("The quick brown fox jumps over the lazy dog", 0, 0xe34bbc7bbc071b6c, 0x7a433ca9c49a9347)
}

// TestHashMatchesExtension pins values hll_hash_* returned on PostgreSQL
// 15 with the extension 2.17 (x86-64), so the hashing is checked without
// a server too; TestGoldenHashes asks the server for many more.
func TestHashMatchesExtension(t *testing.T) {
	t.Parallel()
	f := func(name string, got uint64, want int64) {
		t.Helper()
		if int64(got) != want {
			t.Errorf("%s = %d; want %d", name, int64(got), want)
		}
	}
	f("hll_hash_text('')", Hash(nil), 0)
	f("hll_hash_text('hello')", Hash([]byte("hello")), -3758069500696749310)
	f("hll_hash_bigint(1)", HashInt64(1), 19144387141682250)
	f("hll_hash_integer(1)", HashInt32(1), -8604791237420463362)
	f("hll_hash_smallint(1)", HashInt16(1), 1967286128051477038)
	f("hll_hash_boolean(true)", HashBool(true), 8849112093580131862)
}

// TestSum128TailLengths checks that every tail length feeds its bytes:
// changing any byte of any length up to 33 changes h1.
func TestSum128TailLengths(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 33; n++ {
		b := []byte(strings.Repeat("x", n))
		base, _ := Sum128(b, 0)
		for i := range b {
			c := append([]byte(nil), b...)
			c[i] ^= 0x80
			if h, _ := Sum128(c, 0); h == base {
				t.Errorf("length %d: flipping byte %d left h1 at %016x", n, i, h)
			}
		}
	}
}
