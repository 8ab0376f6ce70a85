package resp

import "fmt"

// multibulk parses the "*<n>\r\n" command at r.r, then its n bulk strings
// "$<len>\r\n<bytes>\r\n", resuming after the last complete bulk when an
// earlier call ran out of bytes. It returns ok=true with no args for an
// empty command, which it consumes.
//
// Every size is checked as soon as it is read, so a command that could not
// fit in MaxCommandBytes fails before its bytes arrive. Each decision depends
// only on the bytes before it, which makes the result independent of how the
// stream was split into reads.
func (r *Reader) multibulk() (args [][]byte, ok bool, err error) {
	start := r.r
	limit := start + r.lim.Command // no byte of this command may sit at or past limit
	// buf ends at the last byte this command may use, so running off its
	// end means either "wait for more" or, at limit, "too big".
	buf := r.buf[:min(r.w, limit)]
	pending, i := r.pending, start+r.next
	if pending == 0 {
		n, next, ok, over := header(buf, start, r.lim.Args, true)
		switch {
		case !ok:
			return nil, false, r.badLength(false, over)
		case next < 0:
			return nil, false, r.short(limit)
		case n <= 0:
			r.r = next
			return nil, true, nil
		}
		pending, i, r.spans = n, next, r.spans[:0]
	}
	spans := r.spans
	for ; pending > 0; pending-- {
		if i >= len(buf) {
			return nil, false, r.suspend(pending, i-start, spans, 0, limit)
		}
		if buf[i] != '$' {
			return nil, false, &ProtocolError{Msg: fmt.Sprintf("expected '$', got '%c'", buf[i])}
		}
		n, j, ok, over := header(buf, i, r.lim.Bulk, false)
		if !ok {
			return nil, false, r.badLength(true, over)
		}
		end := j + n // where the bulk's "\r\n" starts
		if j < 0 || end+2 > len(buf) {
			// Wait for the rest of this bulk. Its header is read again
			// next time, which costs a few bytes. A header cut off
			// (j < 0) has n == 0, so end+2 == 1: never past limit.
			return nil, false, r.suspend(pending, i-start, spans, end+2, limit)
		}
		if buf[end] != '\r' || buf[end+1] != '\n' {
			return nil, false, protocolError(msgBulkEnd)
		}
		spans = append(spans, span{j - start, end - start})
		i = end + 2
	}
	r.pending, r.spans = 0, spans
	args = r.args[:0]
	for _, s := range spans {
		// The capacity limit keeps an append by the caller from
		// overwriting the next argument.
		args = append(args, buf[start+s.start:start+s.end:start+s.end])
	}
	r.r, r.args = i, args
	return args, true, nil
}

// suspend keeps how far a command has been read for the next call: the
// bulks still pending, the offset from the command's start of the next
// one's header, and the spans of those before it. It returns short's
// error, or tooBig's if the bulk being read would end at or past limit
// (its "\r\n" ending before end).
func (r *Reader) suspend(pending, next int, spans []span, end, limit int) error {
	r.pending, r.next, r.spans = pending, next, spans
	if end > limit {
		return r.tooBig()
	}
	return r.short(limit)
}

// short is the error for a command cut off at the end of the buffered
// bytes: none, to wait for more, unless the cut is at limit, the end of the
// largest command.
func (r *Reader) short(limit int) error {
	if r.w >= limit {
		return r.tooBig()
	}
	return nil
}

// header parses the decimal in the "*<n>\r\n" or "$<n>\r\n" line whose type
// byte is at buf[i]. It returns n and the index just past the line, or
// next=-1 when the line runs off the end of buf and could still end well.
// ok is false unless the number is 0..max, or -1 when allowMinusOne is
// set, and is written without '+' or leading zeros; over says it failed
// only for being past max.
func header(buf []byte, i, max int, allowMinusOne bool) (n, next int, ok, over bool) {
	j := i + 1
	neg := false
	if allowMinusOne && j < len(buf) && buf[j] == '-' {
		neg = true
		j++
	}
	digits := j
	n, j = decimal(buf, j, max)
	switch {
	case neg && j > digits && (j > digits+1 || n != 1):
		// -1 is the one negative number: a digit after '-' other than
		// a single 1 fails now, not once the line ends.
		return 0, 0, false, false
	case j >= len(buf):
		return 0, -1, true, false
	case buf[j] != '\r' || j == digits || neg && n != 1:
		// decimal stops at a digit past max or making a leading zero,
		// so both land here.
		return 0, 0, false, n > max && !neg
	case j+1 >= len(buf):
		return 0, -1, true, false
	case buf[j+1] != '\n':
		return 0, 0, false, false
	case neg:
		return -n, j + 2, true, false
	}
	return n, j + 2, true, false
}

// decimal reads the digits at buf[j:] into n and returns the index of the
// first byte it did not take: the first that is not a digit (len(buf) if
// they run off its end), or the digit that makes a leading zero or takes
// n past max. Stopping there, before the line ends, keeps an endless
// number from growing the buffer.
func decimal(buf []byte, j, max int) (n, end int) {
	digits := j
	for ; j < len(buf); j++ {
		d := buf[j] - '0'
		// n == 0 past the first digit means a leading zero.
		if d > 9 || n == 0 && j > digits {
			break
		}
		n = n*10 + int(d)
		if n > max {
			break
		}
	}
	return n, j
}
