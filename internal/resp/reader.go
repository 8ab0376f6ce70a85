package resp

import (
	"errors"
	"io"
)

const (
	// MaxCommandBytes is the size of the largest single command, headers
	// included; a larger one is a *ProtocolError.
	MaxCommandBytes = 1 << 20
	// MaxArgs is the most arguments one command may have.
	MaxArgs = 1 << 16
	// MaxBulkLen is the length of the largest single bulk string.
	MaxBulkLen = 512 << 10

	// maxInline is Redis's PROTO_INLINE_MAX_SIZE: the longest inline line,
	// not counting its '\n'.
	maxInline = 64 << 10
	// pipelineBuf is the most a pipelining client's buffer grows to when
	// reads keep filling it.
	pipelineBuf = 64 << 10
	// minBufSize keeps a tiny requested size from costing a growth step
	// per byte.
	minBufSize = 16
	// maxEmptyReads bounds how often Fill retries a Read that returns
	// neither bytes nor an error, as bufio does.
	maxEmptyReads = 100
)

// ErrWouldBlock is what a non-blocking io.Reader returns when it has
// nothing to read yet; unlike other read errors, Fill does not keep it.
var ErrWouldBlock = errors.New("resp: read would block")

// Reader reads commands from an io.Reader into a buffer it owns and returns
// them without copying. It is not safe for concurrent use; one connection
// has one Reader.
type Reader struct {
	rd   io.Reader
	buf  []byte // len(buf) == cap(buf); bytes in buf[r:w] are unconsumed
	r, w int
	size int   // the buffer's starting size, given back to once drained
	err  error // sticky *ProtocolError: the stream cannot be resynchronised
	rerr error // read error that came with bytes; returned by the next Fill
	// filled says the last Read filled the buffer, so more is probably
	// waiting; the buffer then grows, up to pipelineBuf, instead of
	// shrinking back.
	filled bool

	args [][]byte // reused for every command

	// Progress through a multibulk command that has not fully arrived, so a
	// large command trickling in is parsed once rather than once per Fill.
	// Offsets are relative to r, which Fill's compaction moves, so that
	// they stay valid.
	pending int    // bulks still to parse; 0 when no multibulk is in progress
	next    int    // offset of the next bulk header
	spans   []span // bulks parsed so far

	// scanned counts the bytes after r known to hold no '\n', so an inline
	// line arriving in pieces is searched once.
	scanned int
}

// span locates one bulk string, relative to the start of its command.
type span struct{ start, end int }

// NewReader returns a Reader of r whose buffer starts at size bytes and
// grows, up to MaxCommandBytes, only when one command does not fit. A
// grown buffer is given back once every buffered byte is consumed, so a
// server with many idle connections can start them small (4 KiB).
func NewReader(r io.Reader, size int) *Reader {
	size = max(size, minBufSize)
	return &Reader{rd: r, buf: make([]byte, size), size: size}
}

// Buffered reports how many unconsumed bytes are in the buffer, including
// those of a command that has only partly arrived.
func (r *Reader) Buffered() int { return r.w - r.r }

// Next returns the next complete command that is already buffered, without
// reading from the underlying io.Reader. ok=false with a nil error means no
// complete command is buffered: call Fill. Empty commands ("*0\r\n",
// "*-1\r\n", blank inline lines) are skipped, so a returned command has at
// least one argument.
//
// args and the byte slices in it alias the Reader's buffer and are valid only
// until the next call to Fill; the args slice itself is reused by the next
// call to Next. A malformed stream yields a *ProtocolError, and every later
// call returns the same error.
func (r *Reader) Next() (args [][]byte, ok bool, err error) {
	if r.err != nil {
		return nil, false, r.err
	}
	for {
		switch {
		case r.pending > 0: // a multibulk command is half read
			args, ok, err = r.multibulk()
		case r.r == r.w:
			return nil, false, nil
		case r.buf[r.r] == '*':
			args, ok, err = r.multibulk()
		default:
			args, ok, err = r.inline()
		}
		if err != nil {
			r.err = err
			return nil, false, err
		}
		if !ok || len(args) > 0 {
			return args, ok, nil
		}
		// An empty command was consumed; look at the next one.
	}
}

// Fill reads more bytes with one Read call on the underlying io.Reader and
// reports its error, such as io.EOF, unwrapped so that callers can compare
// it as they would a Read error. Call it only once Next reports ok=false.
//
// Fill first moves the unconsumed bytes to the front of the buffer, which
// invalidates every command returned so far. When they fill the whole buffer
// it doubles the buffer, up to MaxCommandBytes; past that it returns a
// *ProtocolError. It also doubles the buffer (up to 64 KiB) when the last
// Read filled it, and goes back to its starting size once no bytes are
// left and the last Read did not fill it. It allocates only to grow or shrink.
func (r *Reader) Fill() error {
	if r.rerr != nil {
		return r.rerr
	}
	if r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	switch {
	case r.filled && len(r.buf) < pipelineBuf:
		// The last read filled the buffer: the client is pipelining
		// faster than we read, so read more at a time (fewer system
		// calls, and fewer, larger journal records).
		buf := make([]byte, min(2*len(r.buf), pipelineBuf))
		r.w = copy(buf, r.buf[:r.w])
		r.buf = buf
	case r.w == 0 && !r.filled && len(r.buf) > r.size:
		r.buf = make([]byte, r.size)
	}
	if r.w == len(r.buf) {
		if len(r.buf) >= MaxCommandBytes {
			// Next rejects a command before it outgrows MaxCommandBytes, so
			// this means Fill was called with complete commands still
			// buffered.
			return protocolError(msgTooBig)
		}
		buf := make([]byte, min(2*len(r.buf), MaxCommandBytes))
		copy(buf, r.buf[:r.w])
		r.buf = buf
	}
	for range maxEmptyReads {
		n, err := r.rd.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			panic("BUG: resp: io.Reader returned an impossible count")
		}
		r.w += n
		r.filled = r.w == len(r.buf)
		if n > 0 {
			// Serve the bytes first; the error is for the next Fill.
			r.rerr = err
			return nil
		}
		if err != nil {
			if err != ErrWouldBlock { // nothing yet from a non-blocking source
				r.rerr = err
			}
			return err
		}
	}
	return io.ErrNoProgress
}
