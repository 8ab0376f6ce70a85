package resp

import (
	"bytes"
	"testing"
)

// benchmarkReader measures the server loop over a pipelining client that
// keeps sending cmd: one op is one command.
func benchmarkReader(b *testing.B, cmd string) {
	b.ReportAllocs()
	b.SetBytes(int64(len(cmd)))
	r := NewReader(&repeatReader{data: bytes.Repeat([]byte(cmd), 100)}, 64<<10)
	for i := 0; i < b.N; {
		args, ok, err := r.Next()
		if err != nil {
			b.Fatal(err)
		}
		if !ok {
			if err := r.Fill(); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if len(args) != 2 {
			b.Fatalf("got %d args; want 2", len(args))
		}
		i++
	}
}

func BenchmarkReaderMultibulk(b *testing.B) {
	benchmarkReader(b, "*2\r\n$4\r\nINCR\r\n$7\r\npost:42\r\n")
}

func BenchmarkReaderInline(b *testing.B) {
	benchmarkReader(b, "INCR post:42\r\n")
}
