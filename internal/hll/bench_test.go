package hll

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// kindSketches are default sketches of each kind from the same members
// for benchmarks: [from, to) ranges of integers.
var kindRanges = []struct {
	name     string
	from, to int
}{
	{"explicit", 0, 700},
	{"sparse", 0, 3000},
	{"full", 0, 20000},
}

// BenchmarkHashAdd is PFADD's work per member: hash the member's bytes and
// add the hash. explicit: 1,000 distinct members added again and again;
// full: a new member every time into a FULL sketch.
func BenchmarkHashAdd(b *testing.B) {
	b.Run("explicit", func(b *testing.B) {
		s := NewDefault()
		var buf [16]byte
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			binary.BigEndian.PutUint64(buf[8:], uint64(i%1000))
			s.Add(Hash(buf[:]))
		}
	})
	b.Run("full", func(b *testing.B) {
		s := fill(NewDefault(), 0, 20000)
		var buf [16]byte
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			binary.BigEndian.PutUint64(buf[:8], uint64(i)+1<<40)
			s.Add(Hash(buf[:]))
		}
	})
}

func BenchmarkHash(b *testing.B) {
	member := []byte("user:1234567890ab")
	b.SetBytes(int64(len(member)))
	for b.Loop() {
		Hash(member)
	}
}

// BenchmarkUnion is a copy of one sketch unioned with another of the same
// kind (overlapping by half), as a read unions stored and pending sketches.
func BenchmarkUnion(b *testing.B) {
	for _, k := range kindRanges {
		b.Run(k.name, func(b *testing.B) {
			x := fill(NewDefault(), k.from, k.to)
			y := fill(NewDefault(), k.to/2, k.to+k.to/2)
			b.ReportAllocs()
			for b.Loop() {
				if err := x.Clone().Union(y); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMarshal writes each kind's bytes into a reused buffer.
func BenchmarkMarshal(b *testing.B) {
	for _, k := range kindRanges {
		b.Run(k.name, func(b *testing.B) {
			s := fill(NewDefault(), k.from, k.to)
			buf := make([]byte, 0, s.binarySize())
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = s.AppendBinary(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

// BenchmarkParse reads each kind's bytes as stored.
func BenchmarkParse(b *testing.B) {
	for _, k := range kindRanges {
		b.Run(k.name, func(b *testing.B) {
			data := mustBytes(b, fill(NewDefault(), k.from, k.to))
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEstimate(b *testing.B) {
	s := fill(NewDefault(), 0, 100_000)
	b.Run("ertl", func(b *testing.B) {
		for b.Loop() {
			s.Estimate()
		}
	})
	b.Run("classic", func(b *testing.B) {
		for b.Loop() {
			s.ClassicEstimate()
		}
	})
}

// BenchmarkChanged is PFADD's reply per member under make bench's load:
// 1,000 keys each fed members drawn uniformly from 1,000, answered by a
// Sketch per key and by a Tracker per key.
func BenchmarkChanged(b *testing.B) {
	const keys, members, draws = 1000, 1000, 1 << 20
	hashes := make([]uint64, members)
	for i := range hashes {
		hashes[i] = HashInt64(int64(i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	key, member := make([]uint16, draws), make([]uint16, draws)
	for i := range draws {
		key[i], member[i] = uint16(rng.IntN(keys)), uint16(rng.IntN(members))
	}
	run := func(b *testing.B, add func(k int, h uint64) bool) {
		for i := 0; b.Loop(); i++ {
			add(int(key[i%draws]), hashes[member[i%draws]])
		}
	}
	b.Run("sketch", func(b *testing.B) {
		sk := make([]*Sketch, keys)
		for i := range sk {
			sk[i] = NewDefault()
		}
		run(b, func(k int, h uint64) bool { return sk[k].Add(h) })
	})
	b.Run("tracker", func(b *testing.B) {
		tr := make([]*Tracker, keys)
		for i := range tr {
			tr[i] = NewTracker()
		}
		run(b, func(k int, h uint64) bool { return tr[k].Add(h) })
	})
}
