package server

import (
	"errors"
	"unicode"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes.
const MaxKeyLen = 256

var (
	errKeyEmpty   = errors.New("ERR invalid key: empty")
	errKeyLong    = errors.New("ERR invalid key: longer than 256 bytes")
	errKeyControl = errors.New("ERR invalid key: contains whitespace or a control character")
	errKeyUTF8    = errors.New("ERR invalid key: not valid UTF-8")
)

// checkKey reports why key is not a valid counter key, or nil. Keys are
// 1..256 bytes of UTF-8 without whitespace or control characters, so they
// print cleanly, survive inline commands and are valid PostgreSQL text.
func checkKey(key []byte) error {
	switch {
	case len(key) == 0:
		return errKeyEmpty
	case len(key) > MaxKeyLen:
		return errKeyLong
	}
	ascii := true
	for _, c := range key {
		if c <= ' ' || c == 0x7f {
			return errKeyControl
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if ascii {
		return nil
	}
	for i := 0; i < len(key); {
		r, n := utf8.DecodeRune(key[i:])
		if r == utf8.RuneError && n <= 1 {
			return errKeyUTF8
		}
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return errKeyControl
		}
		i += n
	}
	return nil
}
