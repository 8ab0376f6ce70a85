package server

import (
	"context"
	"crypto/subtle"
	"fmt"

	"github.com/counterd/counterd/internal/resp"
)

// RedisVersion is the Redis version counterd reports in HELLO and INFO
// (redis_version). Client libraries gate features on it (RESP3, CLIENT
// SETINFO, the COMMAND reply format), so it is the Redis release whose
// protocol counterd follows, not counterd's own version, which INFO
// reports as counterd_version.
const RedisVersion = "7.2.0"

// Redis's replies for authentication, word for word: clients match them.
const (
	errNoPassword = "ERR AUTH <password> called without any password configured for the default user. " +
		"Are you sure your configuration is correct?"
	errWrongPass   = "WRONGPASS invalid username-password pair or user is disabled."
	errHelloNoAuth = "NOAUTH HELLO must be called with the client already authenticated, otherwise the " +
		"HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select " +
		"the RESP protocol version at the same time"
)

// helloArgs are HELLO's arguments.
type helloArgs struct {
	resp3            bool // the protocol asked for (or the current one)
	user, pass, name []byte
	auth, setName    bool
}

// hello answers HELLO [protover [AUTH username password] [SETNAME name]]:
// it switches the protocol, authenticates and names the connection, all
// or nothing, and replies with the server's map in the new protocol.
func (c *session) hello(_ context.Context, args [][]byte) error {
	st := &c.conn
	h, msg := parseHello(args, st.resp3)
	switch {
	case msg != "":
		c.fail(msg)
		return nil
	case h.setName && !validName(h.name):
		c.fail(errBadName)
		return nil
	}
	if h.auth {
		if !c.s.authOK(h.user, h.pass) {
			c.fail(errWrongPass)
			return nil
		}
		c.authenticated()
	}
	if st.needAuth {
		c.fail(errHelloNoAuth)
		return nil
	}
	st.mu.Lock()
	st.resp3 = h.resp3
	if h.setName {
		st.name = string(h.name)
	}
	st.mu.Unlock()
	c.out = appendHello(c.out, h.resp3, st.id)
	return nil
}

// parseHello parses HELLO's arguments, or returns the error reply; resp3
// is the connection's protocol, kept when no version is given.
func parseHello(args [][]byte, resp3 bool) (helloArgs, string) {
	h := helloArgs{resp3: resp3}
	if len(args) > 1 {
		v, ok := resp.ParseInt(args[1])
		switch {
		case !ok:
			return h, "ERR Protocol version is not an integer or out of range"
		case v != 2 && v != 3:
			return h, "NOPROTO unsupported protocol version"
		}
		h.resp3 = v == 3
	}
	for i := 2; i < len(args); i++ {
		more := len(args) - 1 - i
		switch {
		case is(args[i], "AUTH") && more >= 2:
			h.user, h.pass, h.auth = args[i+1], args[i+2], true
			i += 2
		case is(args[i], "SETNAME") && more >= 1:
			h.name, h.setName = args[i+1], true
			i++
		default:
			return h, fmt.Sprintf("ERR Syntax error in HELLO option '%s'", clip(args[i]))
		}
	}
	return h, ""
}

// appendHello appends HELLO's map of server facts for connection id.
func appendHello(out []byte, resp3 bool, id int64) []byte {
	proto := int64(2)
	if resp3 {
		proto = 3
	}
	out = appendMapHeader(out, resp3, 7)
	out = resp.AppendBulkString(out, "server")
	out = resp.AppendBulkString(out, "redis")
	out = resp.AppendBulkString(out, "version")
	out = resp.AppendBulkString(out, RedisVersion)
	out = resp.AppendBulkString(out, "proto")
	out = resp.AppendInt(out, proto)
	out = resp.AppendBulkString(out, "id")
	out = resp.AppendInt(out, id)
	out = resp.AppendBulkString(out, "mode")
	out = resp.AppendBulkString(out, "standalone")
	out = resp.AppendBulkString(out, "role")
	out = resp.AppendBulkString(out, "master")
	out = resp.AppendBulkString(out, "modules")
	return resp.AppendArrayHeader(out, 0)
}

// auth answers AUTH [username] password, as Redis does for its default
// user: without COUNTERD_PASSWORD the one-argument form is an error and
// the default user takes any password.
func (c *session) auth(_ context.Context, args [][]byte) error {
	if len(args) > 3 {
		c.fail("ERR syntax error")
		return nil
	}
	if len(args) == 2 && c.s.opts.Password == "" {
		c.fail(errNoPassword)
		return nil
	}
	user, pass := []byte("default"), args[1]
	if len(args) == 3 {
		user, pass = args[1], args[2]
	}
	if !c.s.authOK(user, pass) {
		c.fail(errWrongPass)
		return nil
	}
	c.authenticated()
	c.out = resp.AppendOK(c.out)
	return nil
}

// authOK reports whether user and pass log in as Redis's default user:
// any password when none is configured.
func (s *Server) authOK(user, pass []byte) bool {
	if string(user) != "default" {
		return false
	}
	if s.opts.Password == "" {
		return true
	}
	return subtle.ConstantTimeCompare(pass, []byte(s.opts.Password)) == 1
}
