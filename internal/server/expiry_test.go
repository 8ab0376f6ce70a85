package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// SET's and the EXPIRE family's options get the replies docs/protocol.md's
// command table gives: Redis's options counterd does not have are refused
// by name, anything else is Redis's own error. Before, EXPIRE k 10 NX was
// a wrong number of arguments and SET k 1 NX a syntax error.
func TestExpiryOptionErrors(t *testing.T) {
	t.Parallel()
	c := newTestSession(t, "")
	do(t, c, "SET", "k", "1")
	f := func(want string, words ...string) {
		t.Helper()
		if got := do(t, c, words...); got != want+"\r\n" {
			t.Errorf("%q: got %q; want %q", words, got, want)
		}
	}
	const setRefused = `-ERR SET option "%s" is not supported by counterd (only EX, PX, EXAT and PXAT)`
	for _, opt := range []string{"NX", "XX", "GET", "KEEPTTL"} {
		f(fmt.Sprintf(setRefused, opt), "SET", "k", "1", opt)
		f(fmt.Sprintf(setRefused, opt), "SET", "k", "1", "EX", "10", opt)
		f(fmt.Sprintf(setRefused, opt), "set", "k", "1", strings.ToLower(opt), "PX", "10")
	}
	f("-ERR syntax error", "SET", "k", "1", "FOO")
	f("-ERR syntax error", "SET", "k", "1", "EX")
	f("-ERR syntax error", "SET", "k", "1", "EX", "10", "PX", "10")
	f("-ERR value is not an integer or out of range", "SET", "k", "1", "EX", "x")
	f("-ERR invalid expire time in 'set' command", "SET", "k", "1", "EX", "0")
	f("+OK", "SET", "k", "1", "ex", "10")
	for _, cmd := range []string{"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"} {
		for _, opt := range []string{"NX", "XX", "GT", "LT"} {
			f(fmt.Sprintf(`-ERR %s option "%s" is not supported by counterd (no options)`, cmd, opt), cmd, "k", "10", opt)
		}
		f("-ERR Unsupported option FOO", cmd, "k", "10", "FOO")
		f("-ERR wrong number of arguments for '"+strings.ToLower(cmd)+"' command", cmd, "k")
	}
	f("-ERR value is not an integer or out of range", "EXPIRE", "k", "x", "NX")
	f(":1", "EXPIRE", "k", "10")
}

// The expiry is kept in whole seconds, rounded up: the key never expires
// before the time asked, at most 999 ms after. TTL is whole seconds left,
// rounded down, so right after EXPIRE k 10 it reads 10, as in Redis;
// PTTL is the milliseconds left until the kept second. Before, EXPIRE
// rounded the second down (the key expired up to 999 ms early) and TTL
// right after EXPIRE k 10 read 9 when the clock was past the half second.
func TestTTLAfterExpire(t *testing.T) {
	t.Parallel()
	c := newTestSession(t, "")
	now := time.Unix(1700000000, 700_000_000) // past the half second
	c.s.clock = func() time.Time { return now }
	f := func(want string, words ...string) {
		t.Helper()
		if got := do(t, c, words...); got != want+"\r\n" {
			t.Errorf("%q at %s: got %q; want %q", words, now.Format("15:04:05.000"), got, want)
		}
	}
	f("+OK", "SET", "k", "5")
	f(":1", "EXPIRE", "k", "10")
	f(":10", "TTL", "k")
	f(":10300", "PTTL", "k") // expires at :11.000, 10.3 s from :00.700
	now = now.Add(300 * time.Millisecond)
	f(":10", "TTL", "k")
	now = now.Add(time.Millisecond)
	f(":9", "TTL", "k")
	f(":9999", "PTTL", "k")

	now = time.Unix(1700000000, 700_000_000)
	f(":1", "PEXPIRE", "k", "1500")
	f(":2300", "PTTL", "k") // 1500 ms asked, kept as the next whole second
	f(":2", "TTL", "k")
	f(":1", "PEXPIRE", "k", "2300")
	f(":2300", "PTTL", "k") // :03.000 exactly: nothing added

	f("+OK", "SET", "k", "5", "EX", "10")
	f(":10", "TTL", "k")
	f("+OK", "SET", "k", "5", "PX", "10000")
	f(":10300", "PTTL", "k")
	f(":1", "EXPIREAT", "k", "1700000010")
	f(":9300", "PTTL", "k")
	f(":9", "TTL", "k")
}
