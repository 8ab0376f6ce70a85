package resp

import (
	"strconv"
	"strings"
)

// AppendOK appends the simple string reply "+OK\r\n" to dst.
func AppendOK(dst []byte) []byte { return append(dst, "+OK\r\n"...) }

// AppendSimple appends the simple string reply "+s\r\n" to dst. Any '\r'
// or '\n' in s becomes a space, since it would end the reply early.
func AppendSimple(dst []byte, s string) []byte {
	dst = append(dst, '+')
	dst = appendLine(dst, s)
	return append(dst, '\r', '\n')
}

// AppendError appends the error reply "-msg\r\n" to dst. msg starts with an
// error code, as in "ERR unknown command 'foo'"; any '\r' or '\n' in it
// becomes a space, since it would end the reply early (a client-supplied
// command name can contain them).
func AppendError(dst []byte, msg string) []byte {
	dst = append(dst, '-')
	dst = appendLine(dst, msg)
	return append(dst, '\r', '\n')
}

// appendLine appends s with '\r' and '\n' replaced by spaces.
func appendLine(dst []byte, s string) []byte {
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, ' ')
		s = s[i+1:]
	}
}

// AppendInt appends the integer reply ":n\r\n" to dst.
func AppendInt(dst []byte, n int64) []byte {
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\r', '\n')
}

// AppendBulk appends b as the bulk string reply "$len\r\nb\r\n" to dst.
func AppendBulk(dst []byte, b []byte) []byte {
	dst = appendHeader(dst, '$', len(b))
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

// AppendBulkString appends s as the bulk string reply "$len\r\ns\r\n" to dst.
func AppendBulkString(dst []byte, s string) []byte {
	dst = appendHeader(dst, '$', len(s))
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// AppendBulkInt appends the decimal of n as a bulk string reply to dst, as
// GET does for a counter: 42 becomes "$2\r\n42\r\n".
func AppendBulkInt(dst []byte, n int64) []byte {
	var digits [20]byte // len("-9223372036854775808")
	return AppendBulk(dst, strconv.AppendInt(digits[:0], n, 10))
}

// AppendArrayHeader appends "*n\r\n" to dst, which the n replies that are
// the array's elements must follow.
func AppendArrayHeader(dst []byte, n int) []byte { return appendHeader(dst, '*', n) }

func appendHeader(dst []byte, kind byte, n int) []byte {
	dst = append(dst, kind)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}
