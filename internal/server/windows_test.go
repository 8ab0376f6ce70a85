package server

import (
	"net"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/windows"
)

// windowSession is newTestSession with time windows configured.
func windowSession(t *testing.T, cfg string) *session {
	t.Helper()
	win, err := windows.Parse(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := New(pending.New(emptyStore{}, pending.Options{Windows: win}), Options{})
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return s.newSession(a)
}

// Window reads refuse what they cannot answer with an error that says
// why, before they read anything.
func TestWindowReadErrors(t *testing.T) {
	t.Parallel()
	c := windowSession(t, "post:*=minute:2h,hour:14d;view:*=hour:2d")
	f := func(want string, words ...string) {
		t.Helper()
		got := do(t, c, words...)
		if !strings.HasPrefix(got, "-") || !strings.Contains(got, want) {
			t.Errorf("%q: got %q; want an error containing %q", words, got, want)
		}
	}
	f("syntax error: COUNT key [SINCE span]", "COUNT", "post:1", "FROM", "24h")
	f("syntax error", "COUNT", "post:1", "SINCE")
	f(`key "user:1" has no time windows`, "COUNT", "user:1", "SINCE", "1h")
	f("invalid span", "COUNT", "post:1", "SINCE", "yesterday")
	f("not positive", "COUNT", "post:1", "SINCE", "0h")
	f("beyond the retention of every window", "COUNT", "post:1", "SINCE", "15d")
	f(`unknown width "week"`, "RANGE", "post:1", "week", "3")
	f(`key "post:1" has no day window`, "RANGE", "post:1", "day", "3")
	f(`key "user:1" has no time windows`, "RANGE", "user:1", "hour", "3")
	f("121 minute buckets span 121m, beyond the key's minute retention of 2h", "RANGE", "post:1", "minute", "121")
	f("bucket count must be an integer", "RANGE", "post:1", "hour", "0")
	f("bucket count must be an integer", "RANGE", "post:1", "hour", "x")
	f("wrong number of arguments for 'range'", "RANGE", "post:1", "hour")
	f("TOP takes a prefix pattern", "TOP", "post:*:likes", "hour", "24", "10")
	f("TOP takes a prefix pattern", "TOP", "post:", "hour", "24", "10")
	f("no key has a day window", "TOP", "view:*", "day", "3", "10")
	f(`unknown width "week"`, "TOP", "post:*", "week", "3", "10")
	f("limit must be an integer", "TOP", "post:*", "hour", "24", "0")
	f("121 minute buckets span 121m, beyond the longest minute retention of 2h", "TOP", "*", "minute", "121", "10")
	f("wrong number of arguments for 'top'", "TOP", "post:*", "hour", "24")
	if got := do(t, c, "MULTI"); got != "+OK\r\n" {
		t.Fatalf("MULTI: %q", got)
	}
	f("not allowed inside MULTI", "RANGE", "post:1", "hour", "3")
	f("not allowed inside MULTI", "COUNT", "post:1", "SINCE", "1h")
	f("not allowed inside MULTI", "TOP", "post:*", "hour", "3", "1")
	f("EXECABORT", "EXEC")

	none := windowSession(t, "")
	for _, words := range [][]string{{"COUNT", "post:1", "SINCE", "1h"}, {"RANGE", "post:1", "hour", "1"}, {"TOP", "post:*", "hour", "1", "1"}} {
		if got := do(t, none, words...); !strings.Contains(got, "no time windows are configured (COUNTERD_WINDOWS)") {
			t.Errorf("%q without windows: got %q", words, got)
		}
	}
}
