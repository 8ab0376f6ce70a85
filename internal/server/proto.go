package server

import "github.com/counterd/counterd/internal/resp"

// Replies whose type differs between RESP2 and RESP3. A connection speaks
// RESP2 until HELLO 3; every other reply counterd has (integers, bulk
// strings, arrays, errors) is the same in both.

// appendMapHeader starts a map of n pairs: "%n" in RESP3, an array of 2n
// in RESP2.
func appendMapHeader(dst []byte, resp3 bool, n int) []byte {
	if resp3 {
		return resp.AppendMapHeader(dst, n)
	}
	return resp.AppendArrayHeader(dst, 2*n)
}

// appendSetHeader starts a set of n elements: "~n" in RESP3, an array in
// RESP2.
func appendSetHeader(dst []byte, resp3 bool, n int) []byte {
	if resp3 {
		return resp.AppendSetHeader(dst, n)
	}
	return resp.AppendArrayHeader(dst, n)
}

// appendNull is "_" in RESP3 and the null bulk string "$-1" in RESP2, as
// Redis's addReplyNull.
func appendNull(dst []byte, resp3 bool) []byte {
	if resp3 {
		return resp.AppendNull(dst)
	}
	return resp.AppendNullBulk(dst)
}

// appendText is a verbatim "txt" string in RESP3 and a bulk string in
// RESP2, as Redis 7 answers INFO and CLIENT LIST.
func appendText(dst []byte, resp3 bool, s string) []byte {
	if resp3 {
		return resp.AppendVerbatim(dst, "txt", s)
	}
	return resp.AppendBulkString(dst, s)
}

// appendSimples appends names as a set (RESP3) or array of simple strings.
func appendSimples(dst []byte, resp3 bool, names []string) []byte {
	dst = appendSetHeader(dst, resp3, len(names))
	for _, n := range names {
		dst = resp.AppendSimple(dst, n)
	}
	return dst
}
