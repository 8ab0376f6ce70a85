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
			r.pending, r.next, r.spans = pending, i-start, spans
			return nil, false, r.short(limit)
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
			// next time, which costs a few bytes.
			r.pending, r.next, r.spans = pending, i-start, spans
			if j >= 0 && end+2 > limit {
				return nil, false, r.tooBig()
			}
			return nil, false, r.short(limit)
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
// next=-1 when the line runs off the end of buf. ok is false unless the
// number is 0..max, or -1 when allowMinusOne is set, and is written without
// '+' or leading zeros; over says it failed only for being past max.
func header(buf []byte, i, max int, allowMinusOne bool) (n, next int, ok, over bool) {
	j := i + 1
	neg := false
	if allowMinusOne && j < len(buf) && buf[j] == '-' {
		neg = true
		j++
	}
	digits := j
	for ; j < len(buf); j++ {
		d := buf[j] - '0'
		if d > 9 {
			break
		}
		// n == 0 past the first digit means a leading zero. Failing on it,
		// like on n > max, before the line ends keeps an endless number
		// from growing the buffer.
		if n == 0 && j > digits {
			return 0, 0, false, false
		}
		n = n*10 + int(d)
		if n > max {
			return 0, 0, false, !neg
		}
	}
	switch {
	case j >= len(buf):
		return 0, -1, true, false
	case buf[j] != '\r' || j == digits || neg && n != 1:
		return 0, 0, false, false
	case j+1 >= len(buf):
		return 0, -1, true, false
	case buf[j+1] != '\n':
		return 0, 0, false, false
	case neg:
		return -n, j + 2, true, false
	}
	return n, j + 2, true, false
}
