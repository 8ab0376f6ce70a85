package server

import "testing"

// RESET returns the connection to the state it connected in, as Redis
// does: it discards a transaction (inside MULTI too), returns to RESP2,
// forgets the name and, with a password, the authentication, and replies
// +RESET. Before, it was an unknown command (and the README listed it as
// refused inside MULTI).
func TestResetCommand(t *testing.T) {
	t.Parallel()
	f := func(c *session, want string, words ...string) {
		t.Helper()
		if got := do(t, c, words...); got != want {
			t.Errorf("%q: got %q; want %q", words, got, want)
		}
	}
	const (
		reset  = "+RESET\r\n"
		noAuth = "-NOAUTH Authentication required.\r\n"
	)
	c := newTestSession(t, "")
	f(c, helloMap("3"), "HELLO", "3", "SETNAME", "app")
	f(c, "+OK\r\n", "MULTI")
	f(c, "+QUEUED\r\n", "INCR", "a")
	f(c, reset, "RESET")
	f(c, "-ERR EXEC without MULTI\r\n", "EXEC")
	f(c, "$-1\r\n", "CLIENT", "GETNAME") // RESP2's null: no name, protocol 2
	f(c, "$1\r\n0\r\n", "GET", "a")      // the queued INCR never ran
	f(c, "-ERR wrong number of arguments for 'reset' command\r\n", "RESET", "x")

	// A wrong RESET inside MULTI is an error that aborts the transaction,
	// as any command's wrong arity.
	f(c, "+OK\r\n", "MULTI")
	f(c, "-ERR wrong number of arguments for 'reset' command\r\n", "RESET", "x")
	f(c, "-EXECABORT Transaction discarded because of previous errors.\r\n", "EXEC")

	// With a password, RESET logs out; it needs no authentication itself.
	p := newTestSession(t, "pw")
	f(p, noAuth, "GET", "a")
	f(p, reset, "RESET")
	f(p, "+OK\r\n", "AUTH", "pw")
	f(p, "$1\r\n0\r\n", "GET", "a")
	f(p, reset, "reset")
	f(p, noAuth, "GET", "a")
}
