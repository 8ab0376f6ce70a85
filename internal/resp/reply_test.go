package resp

import (
	"math"
	"testing"
)

func TestAppend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"OK", AppendOK(nil), "+OK\r\n"},
		{"simple", AppendSimple(nil, "PONG"), "+PONG\r\n"},
		{"simple sanitized", AppendSimple(nil, "a\r\nb"), "+a  b\r\n"},
		{"error", AppendError(nil, "ERR unknown command 'foo'"), "-ERR unknown command 'foo'\r\n"},
		{"error sanitized", AppendError(nil, "ERR unknown command 'a\r\nb\n'"), "-ERR unknown command 'a  b '\r\n"},
		{"error empty", AppendError(nil, ""), "-\r\n"},
		{"int", AppendInt(nil, 42), ":42\r\n"},
		{"int zero", AppendInt(nil, 0), ":0\r\n"},
		{"int min", AppendInt(nil, math.MinInt64), ":-9223372036854775808\r\n"},
		{"bulk", AppendBulk(nil, []byte("a\r\nb")), "$4\r\na\r\nb\r\n"},
		{"bulk empty", AppendBulk(nil, nil), "$0\r\n\r\n"},
		{"bulk string", AppendBulkString(nil, "hello"), "$5\r\nhello\r\n"},
		{"bulk int", AppendBulkInt(nil, 42), "$2\r\n42\r\n"},
		{"bulk int negative", AppendBulkInt(nil, -7), "$2\r\n-7\r\n"},
		{"bulk int max", AppendBulkInt(nil, math.MaxInt64), "$19\r\n9223372036854775807\r\n"},
		{"array header", AppendArrayHeader(nil, 3), "*3\r\n"},
		{"array header empty", AppendArrayHeader(nil, 0), "*0\r\n"},
		{"appends", AppendInt(AppendOK([]byte("x")), 1), "x+OK\r\n:1\r\n"},
		{"null", AppendNull(nil), "_\r\n"},
		{"null bulk", AppendNullBulk(nil), "$-1\r\n"},
		{"null array", AppendNullArray(nil), "*-1\r\n"},
		{"map header", AppendMapHeader(nil, 7), "%7\r\n"},
		{"set header", AppendSetHeader(nil, 2), "~2\r\n"},
		{"verbatim", AppendVerbatim(nil, "txt", "a:1\r\n"), "=9\r\ntxt:a:1\r\n\r\n"},
		{"verbatim empty", AppendVerbatim(nil, "txt", ""), "=4\r\ntxt:\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if string(tc.got) != tc.want {
				t.Errorf("got %q; want %q", tc.got, tc.want)
			}
		})
	}
}

// TestAppendDoesNotAllocate is not parallel: AllocsPerRun counts every
// allocation in the process.
func TestAppendDoesNotAllocate(t *testing.T) {
	dst := make([]byte, 0, 256)
	got := testing.AllocsPerRun(100, func() {
		d := AppendOK(dst[:0])
		d = AppendSimple(d, "PONG")
		d = AppendError(d, "ERR a\nb")
		d = AppendInt(d, math.MinInt64)
		d = AppendBulk(d, []byte("value"))
		d = AppendBulkString(d, "value")
		d = AppendBulkInt(d, math.MinInt64)
		_ = AppendArrayHeader(d, 2)
	})
	if got != 0 {
		t.Errorf("got %v allocs; want 0", got)
	}
}

func BenchmarkAppendInt(b *testing.B) {
	b.ReportAllocs()
	dst := make([]byte, 0, 64)
	for i := range b.N {
		dst = AppendInt(dst[:0], int64(i))
	}
}

func BenchmarkAppendBulkInt(b *testing.B) {
	b.ReportAllocs()
	dst := make([]byte, 0, 64)
	for i := range b.N {
		dst = AppendBulkInt(dst[:0], int64(i))
	}
}
