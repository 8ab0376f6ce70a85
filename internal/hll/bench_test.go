package hll

import (
	"encoding/binary"
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
