package resp

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The reference decoding: the protocol's rules written down a second
// time, apart from Reader and as plainly as possible, over a whole
// stream at once, with the default limits. FuzzReader compares the
// Reader with it, so a Reader that agrees with itself however the
// stream is cut, but not with the rules, fails.
//
// The rules: a command starting with '*' is a multibulk, "*<n>\r\n" (n
// -1..MaxArgs; 0 and -1 are no command) then n bulks "$<len>\r\n<len
// bytes>\r\n" (len 0..MaxBulkLen), all within MaxCommandBytes; numbers
// are decimal without sign or leading zero. Anything else is an inline
// line up to '\n' (at most 64 KiB before it), one '\r' before the '\n'
// dropped, split at spaces and tabs; a blank line is no command. The
// stream is a protocol error as soon as its bytes can no longer be the
// start of a valid command; if it ends inside a command that more bytes
// could complete, that command's bytes are left over.

// decode is the reference decoding of the whole stream in.
func decode(in []byte) result {
	var res result
	for pos := 0; pos < len(in); {
		decodeOne := decodeInline
		if in[pos] == '*' {
			decodeOne = decodeMultibulk
		}
		cmd, next, err := decodeOne(in, pos)
		switch {
		case err != "":
			res.err = err
			return res
		case next < 0:
			res.rest = len(in) - pos
			return res
		}
		if len(cmd) > 0 {
			res.cmds = append(res.cmds, cmd)
		}
		pos = next
	}
	return res
}

// decodeInline decodes the inline line at in[pos:]: its words, the
// index after it, and next -1 if in ends first.
func decodeInline(in []byte, pos int) (cmd []string, next int, err string) {
	nl := bytes.IndexByte(in[pos:], '\n')
	switch {
	case nl > maxInline, nl < 0 && len(in)-pos > maxInline:
		return nil, 0, msgTooBigInline
	case nl < 0:
		return nil, -1, ""
	}
	line := strings.TrimSuffix(string(in[pos:pos+nl]), "\r")
	words := strings.FieldsFunc(line, func(c rune) bool { return c == ' ' || c == '\t' })
	return words, pos + nl + 1, ""
}

// decodeMultibulk decodes the multibulk command at in[pos:], as
// decodeInline does.
func decodeMultibulk(in []byte, pos int) (cmd []string, next int, err string) {
	limit := pos + MaxCommandBytes // the command's bytes end before it
	v := in[:min(len(in), limit)]
	// more is the result for a command that needs bytes past v.
	more := func() ([]string, int, string) {
		if len(in) >= limit {
			return nil, 0, msgTooBig
		}
		return nil, -1, ""
	}
	n, i, st := refNumber(v, pos+1, MaxArgs, true)
	switch {
	case st == badNumber:
		return nil, 0, msgMultibulkLength
	case st == shortNumber:
		return more()
	case n <= 0:
		return nil, i, ""
	}
	cmd = make([]string, 0, n)
	for range n {
		if i >= len(v) {
			return more()
		}
		if v[i] != '$' {
			return nil, 0, fmt.Sprintf("expected '$', got '%c'", v[i])
		}
		size, j, st := refNumber(v, i+1, MaxBulkLen, false)
		switch {
		case st == badNumber:
			return nil, 0, msgBulkLength
		case st == shortNumber:
			return more()
		case j+size+2 > limit:
			return nil, 0, msgTooBig
		case j+size+2 > len(v):
			return more()
		case string(v[j+size:j+size+2]) != "\r\n":
			return nil, 0, msgBulkEnd
		}
		cmd = append(cmd, string(v[j:j+size]))
		i = j + size + 2
	}
	return cmd, i, ""
}

type numberState int

const (
	goodNumber  numberState = iota
	shortNumber             // v ends inside a line more bytes could make good
	badNumber               // no bytes could
)

// refNumber reads the line "<n>\r\n" at v[i:]: n is 0..max in canonical
// decimal, or -1 when minusOne. It returns n and the index after the
// line.
func refNumber(v []byte, i, max int, minusOne bool) (n, next int, st numberState) {
	valid := func(s string) bool {
		if minusOne && s == "-1" {
			return true
		}
		k, err := strconv.Atoi(s)
		return err == nil && k >= 0 && k <= max && strconv.Itoa(k) == s
	}
	// A good line is a few bytes long: 32 of them, if v has them, decide
	// it (and keep a stream of many numbers from being copied whole for
	// each).
	rest := string(v[i:min(len(v), i+32)])
	cr := strings.IndexByte(rest, '\r')
	if cr < 0 {
		// The line so far must be the start of some good line: a good
		// number's digits start only good numbers.
		if rest == "" || minusOne && rest == "-" || valid(rest) {
			return 0, 0, shortNumber
		}
		return 0, 0, badNumber
	}
	switch {
	case !valid(rest[:cr]):
		return 0, 0, badNumber
	case cr+1 == len(rest):
		return 0, 0, shortNumber
	case rest[cr+1] != '\n':
		return 0, 0, badNumber
	}
	n, _ = strconv.Atoi(rest[:cr])
	return n, i + cr + 2, goodNumber
}

// The reference decoding agrees with every table case: it is checked
// against the hand-written expectations before it checks the Reader.
func TestReferenceDecoding(t *testing.T) {
	t.Parallel()
	for _, tc := range readerCases {
		if got := decode([]byte(tc.in)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v; want %+v", tc.name, got, tc.want)
		}
	}
}
