package server

import (
	"bytes"
	"context"
	"testing"

	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

// loop feeds the same pipelined input again and again.
type loop struct {
	data []byte
	off  int
}

func (l *loop) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

// BenchmarkIncrPath measures the accept path of one INCR: parse, check the
// key, group it, fold the group into the pending buffer (no journal here;
// see the journal's own benchmarks), append the replies.
func BenchmarkIncrPath(b *testing.B) {
	for _, tc := range []struct {
		name string
		cmd  string
	}{
		{"resp", "*2\r\n$4\r\nINCR\r\n$7\r\npost:42\r\n"},
		{"inline", "incr post:42\r\n"},
		{"incrby", "*3\r\n$6\r\nINCRBY\r\n$7\r\npost:42\r\n$2\r\n10\r\n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := New(pending.New(nil, pending.Options{}), Options{})
			rd := resp.NewReader(&loop{data: bytes.Repeat([]byte(tc.cmd), 256)}, 64<<10)
			sess := &session{s: s, out: make([]byte, 0, 64<<10)}
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.cmd)))
			for b.Loop() {
				args, ok, err := rd.Next()
				if err != nil {
					b.Fatal(err)
				}
				if !ok {
					sess.endGroup(ctx)
					sess.out = sess.out[:0]
					if err := rd.Fill(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				_ = sess.exec(ctx, args)
			}
		})
	}
}

// BenchmarkIncrUnpipelined is one unpipelined client's INCR through the
// whole accept path with the journal on: parse, group of one, one journal
// append (a write(2) to the segment), reply. It must not allocate.
func BenchmarkIncrUnpipelined(b *testing.B) {
	for _, mode := range []journal.FsyncMode{journal.FsyncNo, journal.FsyncEverySec} {
		b.Run(mode.String(), func(b *testing.B) {
			jr, _, err := journal.Open(journal.Options{Dir: b.TempDir(), Fsync: mode})
			if err != nil {
				b.Fatal(err)
			}
			defer jr.Close()
			s := New(pending.New(nil, pending.Options{Journal: jr}), Options{})
			cmd := []byte("*2\r\n$4\r\nINCR\r\n$7\r\npost:42\r\n")
			rd := resp.NewReader(&loop{data: cmd}, 4096)
			sess := &session{s: s, out: make([]byte, 0, 4096)}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := rd.Fill(); err != nil {
					b.Fatal(err)
				}
				for {
					args, ok, err := rd.Next()
					if err != nil {
						b.Fatal(err)
					}
					if !ok {
						break
					}
					_ = sess.exec(ctx, args)
				}
				sess.endGroup(ctx)
				sess.out = sess.out[:0]
			}
		})
	}
}
