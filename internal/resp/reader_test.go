package resp

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

type readerCase struct {
	name string
	in   string
	want result
}

var readerCases = []readerCase{
	{"multibulk", "*2\r\n$4\r\nINCR\r\n$7\r\npost:42\r\n",
		result{cmds: [][]string{{"INCR", "post:42"}}}},
	{"pipelined multibulk", "*2\r\n$4\r\nINCR\r\n$1\r\na\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n*1\r\n$4\r\nPING\r\n",
		result{cmds: [][]string{{"INCR", "a"}, {"GET", "b"}, {"PING"}}}},
	{"binary bulk", "*2\r\n$3\r\nGET\r\n$6\r\na\r\n \x00*\r\n",
		result{cmds: [][]string{{"GET", "a\r\n \x00*"}}}},
	{"empty bulk", "*2\r\n$3\r\nGET\r\n$0\r\n\r\n",
		result{cmds: [][]string{{"GET", ""}}}},
	{"empty multibulks skipped", "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n*0\r\n",
		result{cmds: [][]string{{"PING"}}}},
	{"ten digit length", "*1\r\n$10\r\n0123456789\r\n",
		result{cmds: [][]string{{"0123456789"}}}},
	{"inline", "PING\r\nINCRBY k 5\n",
		result{cmds: [][]string{{"PING"}, {"INCRBY", "k", "5"}}}},
	{"inline spaces and tabs", "  GET\t\tk  \t\r\n",
		result{cmds: [][]string{{"GET", "k"}}}},
	{"inline blank lines skipped", "\r\n\n \t \r\nPING\n\n",
		result{cmds: [][]string{{"PING"}}}},
	{"inline quotes are plain bytes", "SET \"a b\" 'c\\n'\n",
		result{cmds: [][]string{{"SET", "\"a", "b\"", "'c\\n'"}}}},
	{"inline only one CR stripped", "GET a\r\r\n",
		result{cmds: [][]string{{"GET", "a\r"}}}},
	{"inline and multibulk mixed", "PING\r\n*1\r\n$4\r\nPING\r\nGET k\n",
		result{cmds: [][]string{{"PING"}, {"PING"}, {"GET", "k"}}}},
	{"incomplete multibulk", "PING\n*2\r\n$4\r\nINCR\r\n$7\r\npost",
		result{cmds: [][]string{{"PING"}}, rest: 22}},
	{"incomplete header", "*2\r\n$4", result{rest: 6}},
	{"incomplete CRLF", "*1\r\n$4\r\nPING\r", result{rest: 13}},
	{"incomplete inline", "PING\nGET k", result{cmds: [][]string{{"PING"}}, rest: 5}},

	{"count not a number", "*x\r\n", result{err: msgMultibulkLength}},
	{"count empty", "*\r\n", result{err: msgMultibulkLength}},
	{"count negative", "*-2\r\n", result{err: msgMultibulkLength}},
	{"count minus zero", "*-0\r\n", result{err: msgMultibulkLength}},
	{"count minus one with digits", "*-10\r\n", result{err: msgMultibulkLength}},
	// Only "1" can follow '-': anything else fails before the line ends.
	{"count minus zero cut off", "*-0", result{err: msgMultibulkLength}},
	{"count minus two cut off", "*-2", result{err: msgMultibulkLength}},
	{"count minus twelve cut off", "*-12", result{err: msgMultibulkLength}},
	{"count minus one cut off", "*-1", result{rest: 3}},
	{"count leading zero", "*01\r\n", result{err: msgMultibulkLength}},
	{"count plus", "*+1\r\n", result{err: msgMultibulkLength}},
	{"count too big", "*65537\r\n", result{err: msgMultibulkLength}},
	{"count huge without CRLF", "*99999999999999999999", result{err: msgMultibulkLength}},
	{"count LF only", "*1\n$4\r\nPING\r\n", result{err: msgMultibulkLength}},
	{"count CR not LF", "*1\r\r", result{err: msgMultibulkLength}},
	{"count trailing space", "*1 \r\n", result{err: msgMultibulkLength}},
	{"missing dollar", "*1\r\nPING\r\n", result{err: "expected '$', got 'P'"}},
	{"missing dollar after bulk", "*2\r\n$1\r\na\r\n:1\r\n", result{err: "expected '$', got ':'"}},
	{"bulk length negative", "*1\r\n$-1\r\n", result{err: msgBulkLength}},
	{"bulk length not a number", "*1\r\n$x\r\n", result{err: msgBulkLength}},
	{"bulk length empty", "*1\r\n$\r\n", result{err: msgBulkLength}},
	{"bulk length leading zero", "*1\r\n$04\r\nPING\r\n", result{err: msgBulkLength}},
	{"bulk length too big", "*1\r\n$524289\r\n", result{err: msgBulkLength}},
	{"bulk length huge without CRLF", "*1\r\n$1000000000", result{err: msgBulkLength}},
	{"bulk too long", "*1\r\n$3\r\nPING\r\n", result{err: msgBulkEnd}},
	// A bulk one byte shorter than declared: its CRLF is taken as data,
	// and the byte after it is not the CR that must end it.
	{"bulk too short", "*1\r\n$3\r\nab\r\n*1\r\n$4\r\nPING\r\n", result{err: msgBulkEnd}},
	{"bulk too short then a bulk", "*2\r\n$3\r\nab\r\n$1\r\nc\r\n", result{err: msgBulkEnd}},
	{"bulk too short at the end", "*1\r\n$3\r\nab\r\n", result{rest: 12}},
	{"bulk CR without LF", "*1\r\n$4\r\nPING\rX", result{err: msgBulkEnd}},
	{"error after good commands", "PING\n*1\r\n$4\r\nPING\r\n*1\r\nx",
		result{cmds: [][]string{{"PING"}, {"PING"}}, err: "expected '$', got 'x'"}},
}

func TestReader(t *testing.T) {
	t.Parallel()
	for _, tc := range readerCases {
		for _, s := range strategies {
			t.Run(tc.name+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				got := s.run(t, []byte(tc.in))
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("got %+v; want %+v", got, tc.want)
				}
			})
		}
	}
}

// TestReaderSplits cuts each stream in two at every byte boundary.
func TestReaderSplits(t *testing.T) {
	t.Parallel()
	for _, tc := range readerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for k := range len(tc.in) + 1 {
				in := []byte(tc.in)
				rd := &splitReader{chunks: [][]byte{in[:k], in[k:]}}
				if got := parse(t, rd, minBufSize); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("split at %d: got %+v; want %+v", k, got, tc.want)
				}
			}
		})
	}
}

// TestReaderLimits feeds commands at and just past each size limit.
func TestReaderLimits(t *testing.T) {
	t.Parallel()
	bulk := func(n int) string { return fmt.Sprintf("$%d\r\n%s\r\n", n, strings.Repeat("a", n)) }
	maxArgs := fmt.Sprintf("*%d\r\n", MaxArgs) + strings.Repeat("$0\r\n\r\n", MaxArgs)
	maxArgsCmd := make([]string, MaxArgs)
	// lastBulk makes "*2\r\n$524288\r\n...\r\n$<lastBulk>\r\n...\r\n"
	// exactly MaxCommandBytes long; both headers are 9 bytes.
	lastBulk := MaxCommandBytes - len("*2\r\n") - 2*len("$524288\r\n\r\n") - MaxBulkLen
	if got := len("*2\r\n" + bulk(MaxBulkLen) + bulk(lastBulk)); got != MaxCommandBytes {
		t.Fatalf("largest command is %d bytes; want %d", got, MaxCommandBytes)
	}
	tests := []struct {
		name string
		in   string
		want result
	}{
		{"largest bulk", "*1\r\n" + bulk(MaxBulkLen),
			result{cmds: [][]string{{strings.Repeat("a", MaxBulkLen)}}}},
		{"most args", maxArgs, result{cmds: [][]string{maxArgsCmd}}},
		// The second header announces a command past MaxCommandBytes; the
		// stream ends there, so the error must come before its data.
		{"command too big", "*3\r\n" + bulk(MaxBulkLen) + fmt.Sprintf("$%d\r\n", MaxBulkLen),
			result{err: msgTooBig}},
		{"largest command", "*2\r\n" + bulk(MaxBulkLen) + bulk(lastBulk),
			result{cmds: [][]string{{strings.Repeat("a", MaxBulkLen), strings.Repeat("a", lastBulk)}}}},
		{"one byte too big", "*2\r\n" + bulk(MaxBulkLen) + bulk(lastBulk+1), result{err: msgTooBig}},
		{"longest inline", strings.Repeat("a", maxInline) + "\n",
			result{cmds: [][]string{{strings.Repeat("a", maxInline)}}}},
		{"inline too long", strings.Repeat("a", maxInline+1), result{err: msgTooBigInline}},
		{"inline too long with CR", strings.Repeat("a", maxInline) + "\r\n", result{err: msgTooBigInline}},
	}
	for _, tc := range tests {
		if got := decode([]byte(tc.in)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: reference decoding: got %.200v; want %.200v", tc.name, got, tc.want)
		}
		for _, s := range strategies {
			t.Run(tc.name+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				got := s.run(t, []byte(tc.in))
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("got %.200v; want %.200v", got, tc.want)
				}
			})
		}
	}
}

// TestReaderHostileHeader checks that a header announcing a size past a
// limit fails at once, without growing the buffer.
func TestReaderHostileHeader(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"bulk length", "*1\r\n$524289\r\n", msgBulkLength},
		{"bulk length digits", "*1\r\n$9999999", msgBulkLength},
		{"count", "*1000000\r\n", msgMultibulkLength},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := NewReader(strings.NewReader(tc.in), minBufSize)
			var err error
			for err == nil {
				var ok bool
				if _, ok, err = r.Next(); !ok && err == nil {
					err = r.Fill()
				}
			}
			if got := len(r.buf); got != minBufSize {
				t.Errorf("buffer grew to %d; want %d", got, minBufSize)
			}
			if got := protocolMsg(t, err); got != tc.want {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

func TestReaderErrorIsSticky(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader("*x\r\nPING\r\n"), minBufSize)
	if err := r.Fill(); err != nil {
		t.Fatalf("Fill: got %v; want nil", err)
	}
	_, _, first := r.Next()
	_, ok, second := r.Next()
	if first == nil || second != first || ok {
		t.Errorf("got %v then (%v, %v); want the same *ProtocolError twice", first, ok, second)
	}
	if got, want := first.Error(), "Protocol error: invalid multibulk length"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

// TestArgsCapacity checks that every argument's capacity ends with it, so
// that appending to one cannot overwrite the next or the read buffer.
func TestArgsCapacity(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "a b\n"} {
		r := NewReader(strings.NewReader(in), 64)
		if err := r.Fill(); err != nil {
			t.Fatalf("Fill: got %v; want nil", err)
		}
		args, ok, err := r.Next()
		if !ok || err != nil {
			t.Fatalf("Next: got (%v, %v); want a command", ok, err)
		}
		for i, a := range args {
			if cap(a) != len(a) {
				t.Errorf("%q: arg %d: got cap %d; want len %d", in, i, cap(a), len(a))
			}
		}
	}
}

type errReader struct {
	n   int
	err error
}

func (e errReader) Read([]byte) (int, error) { return e.n, e.err }

func TestFillErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	full := strings.Repeat("PING\n", MaxCommandBytes/5+1)
	tests := []struct {
		name string
		r    *Reader
		want error // nil means a *ProtocolError
	}{
		{"EOF unwrapped", NewReader(strings.NewReader(""), minBufSize), io.EOF},
		{"read error", NewReader(errReader{err: boom}, minBufSize), boom},
		{"no progress", NewReader(errReader{}, minBufSize), io.ErrNoProgress},
		{"full at the limit", NewReader(strings.NewReader(full), MaxCommandBytes), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.r.Fill()
			if tc.want == nil {
				// The first Fill fills the buffer; a second one without
				// draining it has nowhere to put bytes.
				if err != nil {
					t.Fatalf("first Fill: got %v; want nil", err)
				}
				if got := protocolMsg(t, tc.r.Fill()); got != msgTooBig {
					t.Errorf("got %q; want %q", got, msgTooBig)
				}
				return
			}
			if err != tc.want {
				t.Errorf("got %v; want %v", err, tc.want)
			}
			if again := tc.r.Fill(); tc.want != io.ErrNoProgress && again != tc.want {
				t.Errorf("second Fill: got %v; want %v", again, tc.want)
			}
		})
	}
}

func TestBuffered(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader("PING\nGET"), minBufSize)
	if err := r.Fill(); err != nil {
		t.Fatalf("Fill: got %v; want nil", err)
	}
	if got := r.Buffered(); got != 8 {
		t.Errorf("before Next: got %d; want 8", got)
	}
	if _, ok, _ := r.Next(); !ok {
		t.Fatalf("Next: got no command; want PING")
	}
	if got := r.Buffered(); got != 3 {
		t.Errorf("after Next: got %d; want 3", got)
	}
}

// TestNextDoesNotAllocate is not parallel: AllocsPerRun counts every
// allocation in the process, so other tests running would be counted too.
func TestNextDoesNotAllocate(t *testing.T) {
	for _, in := range []string{"*2\r\n$4\r\nINCR\r\n$7\r\npost:42\r\n", "INCR post:42\r\n"} {
		r := NewReader(&repeatReader{data: []byte(in)}, 1024)
		drain := func() {
			for {
				_, ok, err := r.Next()
				if err != nil {
					t.Fatalf("Next: got %v; want nil", err)
				}
				if !ok {
					break
				}
			}
			if err := r.Fill(); err != nil {
				t.Fatalf("Fill: got %v; want nil", err)
			}
		}
		drain() // let args and spans reach their steady size
		if got := testing.AllocsPerRun(100, drain); got != 0 {
			t.Errorf("%q: got %v allocs per Fill; want 0", in, got)
		}
	}
}

// The buffer grows for one large command and goes back to its starting
// size once that command is consumed, so an idle connection stays small.
func TestReaderGrowsAndShrinks(t *testing.T) {
	t.Parallel()
	big := "*2\r\n$4\r\nPING\r\n$10000\r\n" + strings.Repeat("x", 10000) + "\r\n"
	r := NewReader(strings.NewReader(big+"PING\r\n"), 4096)
	var got []int
	for range 100 {
		args, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = append(got, len(args))
			if len(got) == 2 {
				break
			}
			continue
		}
		if err := r.Fill(); err != nil {
			t.Fatalf("Fill: %v", err)
		}
	}
	if len(got) != 2 || got[0] != 2 || got[1] != 1 {
		t.Fatalf("commands: got %v; want [2 1]", got)
	}
	if n := len(r.buf); n < 10000 {
		t.Fatalf("buffer after a 10 KB command: got %d bytes; want it grown", n)
	}
	if err := r.Fill(); err != io.EOF {
		t.Fatalf("Fill at the end: got %v; want EOF", err)
	}
	if n := len(r.buf); n != 4096 {
		t.Fatalf("buffer once drained: got %d bytes; want 4096", n)
	}
}

// A client pipelining faster than we read fills the buffer read after
// read; the buffer then grows to 64 KiB so one read takes many commands,
// and shrinks back once a read no longer fills it.
func TestReaderGrowsForPipelines(t *testing.T) {
	t.Parallel()
	pipeline := strings.Repeat("PING\r\n", 40000) // 240 KB
	r := NewReader(strings.NewReader(pipeline), 4096)
	var commands, most int
	for range 100000 {
		_, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			commands++
			continue
		}
		most = max(most, len(r.buf))
		if err := r.Fill(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if commands != 40000 {
		t.Fatalf("commands: got %d; want 40000", commands)
	}
	if most != 64<<10 {
		t.Fatalf("largest buffer while pipelining: got %d; want %d", most, 64<<10)
	}
	if n := len(r.buf); n != 4096 {
		t.Fatalf("buffer once the pipeline is drained: got %d; want 4096", n)
	}
}
