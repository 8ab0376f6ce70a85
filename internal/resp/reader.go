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
	// reads keep filling it. A buffer grown past it (for one large
	// command) is given back as soon as it is drained.
	pipelineBuf = 64 << 10
	// minBufSize keeps a tiny requested size from costing a growth step
	// per byte.
	minBufSize = 16
	// maxEmptyReads bounds how often Fill retries a Read that returns
	// neither bytes nor an error, as bufio does.
	maxEmptyReads = 100
)

// Limits bound one command. The zero value of a field means its default:
// MaxCommandBytes, MaxArgs, MaxBulkLen, and 64 KiB for an inline line.
type Limits struct {
	// Command is the most bytes one command may take, headers included;
	// the Reader's buffer never grows past it.
	Command int
	Args    int // the most arguments of one command
	Bulk    int // the longest argument
	Inline  int // the longest inline line, not counting its '\n'
	// Unauthenticated words the errors as Redis does for a client that
	// has not authenticated ("unauthenticated bulk length").
	Unauthenticated bool
}

// UnauthenticatedLimits is what a connection may send before it
// authenticates, as Redis allows: 10 arguments of at most 16 KiB, and
// here 32 KiB in all, so a client that does not know the password cannot
// make the server buffer more than that. A function, so no caller can
// change the limits of every other.
func UnauthenticatedLimits() Limits {
	return Limits{Command: 32 << 10, Args: 10, Bulk: 16 << 10, Inline: 32 << 10, Unauthenticated: true}
}

// withDefaults fills the zero fields of l. A bulk past Command is left to
// the command's limit, whose error names it.
func (l Limits) withDefaults() Limits {
	if l.Command <= 0 {
		l.Command = MaxCommandBytes
	}
	if l.Args <= 0 {
		l.Args = MaxArgs
	}
	if l.Bulk <= 0 {
		l.Bulk = MaxBulkLen
	}
	if l.Inline <= 0 {
		l.Inline = maxInline
	}
	l.Inline = min(l.Inline, l.Command-1) // and its '\n'
	l.Command = max(l.Command, minBufSize)
	return l
}

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
	size int // the buffer's starting size, given back to once drained
	lim  Limits
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
// grows, up to MaxCommandBytes (see SetLimits), only when one command does
// not fit. A grown buffer is given back once every buffered byte is
// consumed, so a server with many idle connections can start them small
// (4 KiB).
func NewReader(r io.Reader, size int) *Reader {
	size = max(size, minBufSize)
	return &Reader{rd: r, buf: make([]byte, size), size: size, lim: Limits{}.withDefaults()}
}

// SetLimits bounds the commands Next parses from now on; a command already
// partly parsed is checked against them as the rest arrives. A command
// past a limit is a *ProtocolError, found as soon as a header announces
// it, so the buffer never grows past l.Command.
func (r *Reader) SetLimits(l Limits) {
	r.lim = l.withDefaults()
	if len(r.buf) > r.lim.Command && r.r == r.w {
		r.buf = make([]byte, r.size)
		r.r, r.w, r.filled = 0, 0, false
	}
}

// Cap reports the size of the Reader's buffer, what it holds in memory.
func (r *Reader) Cap() int { return len(r.buf) }

// Shrink reports whether the client looks idle: nothing is buffered and
// the last read did not fill the buffer. If so, it gives a grown buffer
// back, so a connection that sent one large command, or a burst, and then
// went quiet does not keep it; a buffer grown past 64 KiB for one command
// is given back even after a full read. Call it only when no command
// returned by Next is still in use. Fill does the same before it reads.
func (r *Reader) Shrink() (idle bool) {
	if r.r != r.w {
		return false
	}
	if len(r.buf) > r.size && (!r.filled || len(r.buf) > pipelineBuf) {
		r.buf = make([]byte, r.size)
		r.r, r.w, r.filled = 0, 0, false
	}
	return !r.filled
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
// it doubles the buffer, up to the command limit (see SetLimits); past that
// it returns a *ProtocolError. It also doubles the buffer (up to 64 KiB)
// when the last Read filled it, and goes back to its starting size once no
// bytes are left and the last Read did not fill it, or the buffer grew past
// 64 KiB for one large command. It allocates only to grow or shrink.
func (r *Reader) Fill() error {
	if r.rerr != nil {
		return r.rerr
	}
	if err := r.makeRoom(); err != nil {
		return err
	}
	return r.read()
}

// makeRoom moves the unconsumed bytes to the front of the buffer and
// resizes it as Fill says, so that there is room to read into.
func (r *Reader) makeRoom() error {
	if r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	switch {
	case r.filled && len(r.buf) < min(pipelineBuf, r.lim.Command):
		// The last read filled the buffer: the client is pipelining
		// faster than we read, so read more at a time (fewer system
		// calls, and fewer, larger journal records).
		buf := make([]byte, min(2*len(r.buf), pipelineBuf, r.lim.Command))
		r.w = copy(buf, r.buf[:r.w])
		r.buf = buf
	case r.w == 0 && len(r.buf) > r.size && (!r.filled || len(r.buf) > pipelineBuf):
		// Drained: a buffer grown for a large command is not kept
		// for pipelining, which needs at most pipelineBuf.
		r.buf = make([]byte, r.size)
		r.filled = false
	}
	if r.w == len(r.buf) {
		if len(r.buf) >= r.lim.Command {
			// Next rejects a command before it outgrows the limit, so
			// this means Fill was called with complete commands still
			// buffered.
			return r.tooBig()
		}
		buf := make([]byte, min(2*len(r.buf), r.lim.Command))
		copy(buf, r.buf[:r.w])
		r.buf = buf
	}
	return nil
}

// read makes one Read call into the free end of the buffer, retrying up to
// maxEmptyReads times while it returns nothing and no error.
func (r *Reader) read() error {
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
