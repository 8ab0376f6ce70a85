package resp

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// result is everything a client stream produced: the commands, then either
// the protocol error that ended it or, at io.EOF, the bytes left over from a
// command that never completed.
type result struct {
	cmds [][]string
	err  string // ProtocolError.Msg; "" when the stream reached io.EOF
	rest int    // Buffered() at io.EOF
}

// parse reads every command from rd with a Reader of the given buffer size,
// in the loop a server uses: drain Next, then Fill.
func parse(tb testing.TB, rd io.Reader, size int) result {
	tb.Helper()
	r := NewReader(rd, size)
	var res result
	for {
		for {
			args, ok, err := r.Next()
			if err != nil {
				res.err = protocolMsg(tb, err)
				return res
			}
			if !ok {
				break
			}
			if len(args) == 0 {
				tb.Fatalf("Next returned ok with no args")
			}
			cmd := make([]string, len(args))
			for i, a := range args {
				cmd[i] = string(a)
			}
			res.cmds = append(res.cmds, cmd)
		}
		if err := r.Fill(); err != nil {
			if err == io.EOF {
				res.rest = r.Buffered()
				return res
			}
			res.err = protocolMsg(tb, err)
			return res
		}
	}
}

func protocolMsg(tb testing.TB, err error) string {
	tb.Helper()
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		tb.Fatalf("got error %v (%T); want *ProtocolError", err, err)
	}
	return pe.Msg
}

// strategy is one way of cutting a stream into reads.
type strategy struct {
	name string
	size int // Reader buffer size; 0 means the length of the stream
	rd   func(in []byte) io.Reader
}

// run parses in as s cuts it.
func (s strategy) run(tb testing.TB, in []byte) result {
	tb.Helper()
	size := s.size
	if size == 0 {
		size = len(in)
	}
	return parse(tb, s.rd(in), size)
}

// strategies cover one big read, one byte per read (every split point at
// once), bytes arriving with io.EOF, and a buffer small enough to compact
// and grow.
var strategies = []strategy{
	{"whole", 0, func(in []byte) io.Reader { return bytes.NewReader(in) }},
	{"one byte", minBufSize, func(in []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(in)) }},
	{"data with EOF", 0, func(in []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(in)) }},
	{"small buffer", minBufSize, func(in []byte) io.Reader { return bytes.NewReader(in) }},
	{"7 byte reads", minBufSize, func(in []byte) io.Reader { return &chunkReader{data: in, size: 7} }},
}

// chunkReader returns at most size bytes per Read.
type chunkReader struct {
	data []byte
	size int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.size)], c.data)
	c.data = c.data[n:]
	return n, nil
}

// splitReader returns its chunks one per Read.
type splitReader struct{ chunks [][]byte }

func (s *splitReader) Read(p []byte) (int, error) {
	for len(s.chunks) > 0 && len(s.chunks[0]) == 0 {
		s.chunks = s.chunks[1:]
	}
	if len(s.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.chunks[0])
	s.chunks[0] = s.chunks[0][n:]
	return n, nil
}

// repeatReader returns its data over and over, filling each Read, as a
// pipelining client keeps a socket full.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], r.data[r.off:])
		n += k
		r.off = (r.off + k) % len(r.data)
	}
	return n, nil
}
