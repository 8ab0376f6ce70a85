package resp

import "bytes"

// inline parses the inline command at r.r: one line, ended by '\n' with an
// optional '\r' before it, of arguments separated by spaces and tabs. It
// returns ok=true with no args for a blank line, which it consumes.
func (r *Reader) inline() (args [][]byte, ok bool, err error) {
	limit := r.r + r.lim.Inline + 1 // the '\n' may be at most at limit-1
	end := min(r.w, limit)
	k := bytes.IndexByte(r.buf[r.r+r.scanned:end], '\n')
	if k < 0 {
		if end == limit {
			return nil, false, r.tooBigInline()
		}
		r.scanned = end - r.r
		return nil, false, nil
	}
	nl := r.r + r.scanned + k
	line := r.buf[r.r:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	r.r, r.scanned = nl+1, 0
	r.args = r.args[:0]
	for i := 0; i < len(line); {
		if isBlank(line[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(line) && !isBlank(line[j]) {
			j++
		}
		r.args = append(r.args, line[i:j:j])
		i = j
	}
	return r.args, true, nil
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }
