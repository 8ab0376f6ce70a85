package resp

import "strconv"

// RESP3 replies. A connection speaks RESP3 once it has sent HELLO 3; the
// caller picks these or their RESP2 equivalents (shown on each) by the
// connection's protocol.

// AppendNull appends the RESP3 null "_\r\n" to dst (RESP2 has a null bulk
// string, [AppendNullBulk], and a null array, [AppendNullArray]).
func AppendNull(dst []byte) []byte { return append(dst, "_\r\n"...) }

// AppendNullBulk appends the RESP2 null bulk string "$-1\r\n" to dst.
func AppendNullBulk(dst []byte) []byte { return append(dst, "$-1\r\n"...) }

// AppendNullArray appends the RESP2 null array "*-1\r\n" to dst.
func AppendNullArray(dst []byte) []byte { return append(dst, "*-1\r\n"...) }

// AppendMapHeader appends the RESP3 map header "%n\r\n" to dst, which n
// key-value pairs must follow. In RESP2 the same pairs follow an array
// header of 2n.
func AppendMapHeader(dst []byte, n int) []byte { return appendHeader(dst, '%', n) }

// AppendSetHeader appends the RESP3 set header "~n\r\n" to dst, which n
// elements must follow. In RESP2 they follow an array header of n.
func AppendSetHeader(dst []byte, n int) []byte { return appendHeader(dst, '~', n) }

// AppendVerbatim appends text as the RESP3 verbatim string
// "=len\r\nfmt:text\r\n" to dst; format is three bytes such as "txt". In
// RESP2 the text is a bulk string.
func AppendVerbatim(dst []byte, format, text string) []byte {
	dst = append(dst, '=')
	dst = strconv.AppendInt(dst, int64(len(format)+1+len(text)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, format...)
	dst = append(dst, ':')
	dst = append(dst, text...)
	return append(dst, '\r', '\n')
}
