// Package hll builds HyperLogLog sketches byte for byte as PostgreSQL's
// hll extension (citusdata/postgresql-hll, Debian postgresql-15-hll)
// stores them, so a sketch made in Go and one made in SQL from the same
// members are the same value and union with each other in either place.
//
// The one idea to hold first: a member becomes a 64-bit hash, and the
// sketch only ever sees hashes. Hash(member) is the first half of
// MurmurHash3 x64_128 with seed 0, which is what the extension's
// hll_hash_bytea(member) returns; for a member that is valid UTF-8 in a
// UTF-8 database hll_hash_text(member) is the same number, since both hash
// the bytes as they are. So
//
//	SELECT hll_add_agg(hll_hash_bytea(m), 14, 5, -1, 1) FROM members
//
// builds the bytes New(DefaultSettings) gives after Add(Hash(m)) for each
// member. Turn text into bytes with convert_to(m, 'UTF8'), not m::bytea:
// that cast reads backslash escapes, so 'a\b'::bytea is not the bytes a,\,b.
package hll
