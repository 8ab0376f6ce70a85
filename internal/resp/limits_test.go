package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// parseLimited is parse with l set before the first read.
func parseLimited(tb testing.TB, rd io.Reader, size int, l Limits) (cmds int, err error) {
	tb.Helper()
	r := NewReader(rd, size)
	r.SetLimits(l)
	for {
		for {
			_, ok, err := r.Next()
			if err != nil {
				return cmds, err
			}
			if !ok {
				break
			}
			cmds++
		}
		if err := r.Fill(); err != nil {
			if err == io.EOF {
				return cmds, nil
			}
			return cmds, err
		}
	}
}

// Before AUTH a command may have 10 arguments of 16 KiB and take 32 KiB,
// with Redis's words for the first two; every limit is found from the
// header or the bytes that arrived, however the stream is cut, and the
// buffer never grows past the command limit.
func TestUnauthenticatedLimits(t *testing.T) {
	t.Parallel()
	bulk := func(n int) string { return fmt.Sprintf("$%d\r\n%s\r\n", n, strings.Repeat("a", n)) }
	f := func(name, in string, wantCmds int, wantMsg string) {
		t.Helper()
		for _, s := range strategies {
			size := max(s.size, minBufSize)
			if s.size == 0 {
				size = 4 << 10 // a connection's buffer, not the stream's length
			}
			cmds, err := parseLimited(t, s.rd([]byte(in)), size, UnauthenticatedLimits())
			got := ""
			if err != nil {
				var pe *ProtocolError
				if !errors.As(err, &pe) {
					t.Fatalf("%s/%s: got %v; want a *ProtocolError", name, s.name, err)
				}
				got = pe.Msg
			}
			if cmds != wantCmds || got != wantMsg {
				t.Errorf("%s/%s: got %d commands, error %q; want %d, %q", name, s.name, cmds, got, wantCmds, wantMsg)
			}
		}
	}
	f("AUTH", "*3\r\n$4\r\nAUTH\r\n$7\r\ndefault\r\n$6\r\nsecret\r\n", 1, "")
	f("10 arguments", "*10\r\n"+strings.Repeat(bulk(1), 10), 1, "")
	f("11 arguments", "*11\r\n", 0, msgUnauthMultibulk)
	f("largest argument", "*2\r\n$4\r\nAUTH\r\n"+bulk(16<<10), 1, "")
	f("argument too long", "*2\r\n$4\r\nAUTH\r\n$16385\r\n", 0, msgUnauthBulk)
	f("malformed length", "*2\r\n$4\r\nAUTH\r\n$x\r\n", 0, msgBulkLength)
	f("command too big", "*3\r\n$4\r\nAUTH\r\n"+bulk(16<<10)+"$16384\r\n", 0, msgUnauthTooBig)
	f("inline too long", strings.Repeat("a", 40<<10), 0, msgUnauthTooBig)
}

// COUNTERD_CLIENT_QUERY_BUFFER_LIMIT bounds one command: past it the error
// names the limit, and the buffer never grew beyond it.
func TestCommandLimit(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	echo := func(n int) string { return fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", n, strings.Repeat("a", n)) }
	r := NewReader(strings.NewReader(echo(60000)+echo(70000)), 4<<10)
	r.SetLimits(Limits{Command: limit})
	var err error
	for cmds := 0; err == nil; {
		var ok bool
		if _, ok, err = r.Next(); ok {
			cmds++
			continue
		}
		if err == nil {
			err = r.Fill()
		}
		if cmds > 1 {
			t.Fatalf("a command past the limit was returned")
		}
	}
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Msg != msgTooBig || pe.Limit != limit {
		t.Fatalf("got %v; want too big request with limit %d", err, limit)
	}
	if want := "Protocol error: too big request (limit 65536 bytes)"; pe.Error() != want {
		t.Errorf("Error() = %q; want %q", pe.Error(), want)
	}
	if r.Cap() > limit {
		t.Errorf("buffer grew to %d bytes; want at most the limit, %d", r.Cap(), limit)
	}
}

// A buffer grown for a large command is given back once it is drained,
// by the next Fill or by Shrink, whether or not the last read filled it;
// one grown for pipelining (at most 64 KiB) is kept while reads keep
// filling it.
func TestReaderGivesBufferBack(t *testing.T) {
	t.Parallel()
	bulk := func(n int) string { return fmt.Sprintf("$%d\r\n%s\r\n", n, strings.Repeat("a", n)) }
	big := "*2\r\n" + bulk(4) + bulk(500<<10)
	exact := "*2\r\n" + bulk(MaxBulkLen) + bulk(MaxCommandBytes-len("*2\r\n")-2*len("$524288\r\n\r\n")-MaxBulkLen)
	if len(exact) != MaxCommandBytes {
		t.Fatalf("exact command is %d bytes; want %d", len(exact), MaxCommandBytes)
	}
	for _, tc := range []struct {
		name   string
		in     string
		shrink bool // Shrink rather than Fill
	}{
		{"then a small command", big + "PING\r\n", false},
		// The command ends exactly where a read fills the buffer (it
		// takes MaxCommandBytes), which used to keep the grown buffer for
		// good.
		{"ending a full read", exact, false},
		{"shrunk while idle", big, true},
	} {
		r := NewReader(&splitReader{chunks: [][]byte{[]byte(tc.in)}}, 4<<10)
		grown := 0
		for {
			_, ok, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				grown = max(grown, r.Cap())
				continue
			}
			if tc.shrink && grown > 0 && r.Buffered() == 0 {
				if !r.Shrink() {
					t.Errorf("%s: Shrink reports a drained reader busy", tc.name)
				}
				break
			}
			if err := r.Fill(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if grown <= 64<<10 {
			t.Fatalf("%s: buffer of %d bytes while holding a 500 KiB command; the test needs it grown", tc.name, grown)
		}
		if r.Cap() != 4<<10 {
			t.Errorf("%s: buffer of %d bytes once drained; want 4096", tc.name, r.Cap())
		}
	}
	// Pipelining: every read fills the buffer, which grows to 64 KiB and
	// stays there while the client keeps it full.
	r := NewReader(&repeatReader{data: bytes.Repeat([]byte("PING\r\n"), 1000)}, 4<<10)
	for range 20 {
		for {
			_, ok, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
		}
		if err := r.Fill(); err != nil {
			t.Fatal(err)
		}
	}
	if r.Cap() != pipelineBuf {
		t.Fatalf("pipelining buffer: %d bytes; want %d", r.Cap(), pipelineBuf)
	}
}
