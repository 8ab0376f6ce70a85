package server

import "testing"

// DEL counts a key named twice once, as Redis does, at once and inside
// MULTI alike (both run DEL's one description). Before, DEL k k replied
// 2 at once and 1 inside MULTI.
func TestDelKeyNamedTwice(t *testing.T) {
	t.Parallel()
	c := newTestSession(t, "")
	f := func(want string, words ...string) {
		t.Helper()
		if got := do(t, c, words...); got != want {
			t.Errorf("%q: got %q; want %q", words, got, want)
		}
	}
	f(":1\r\n", "INCR", "k")
	f(":1\r\n", "DEL", "k", "k", "other")
	f(":1\r\n", "INCR", "k")
	f("+OK\r\n", "MULTI")
	f("+QUEUED\r\n", "DEL", "k", "k")
	f("*1\r\n:1\r\n", "EXEC")
	f("$1\r\n0\r\n", "GET", "k")
}
