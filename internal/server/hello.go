package server

import (
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

// hello answers HELLO [protover [AUTH username password] [SETNAME name]]:
// it switches the protocol, authenticates and names the connection, all
// or nothing, and replies with the server's map in the new protocol.
func (c *session) hello(args [][]byte) {
	st := &c.conn
	resp3 := st.resp3
	if len(args) > 1 {
		v, ok := resp.ParseInt(args[1])
		switch {
		case !ok:
			c.fail("ERR Protocol version is not an integer or out of range")
			return
		case v != 2 && v != 3:
			c.fail("NOPROTO unsupported protocol version")
			return
		}
		resp3 = v == 3
	}
	var user, pass, name []byte
	auth, setName := false, false
	for i := 2; i < len(args); i++ {
		more := len(args) - 1 - i
		switch {
		case is(args[i], "AUTH") && more >= 2:
			user, pass, auth = args[i+1], args[i+2], true
			i += 2
		case is(args[i], "SETNAME") && more >= 1:
			name, setName = args[i+1], true
			i++
		default:
			c.fail(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", clip(args[i])))
			return
		}
	}
	if setName && !validName(name) {
		c.fail(errBadName)
		return
	}
	if auth {
		if !c.s.authOK(user, pass) {
			c.fail(errWrongPass)
			return
		}
		c.authenticated()
	}
	if st.needAuth {
		c.fail(errHelloNoAuth)
		return
	}
	st.mu.Lock()
	st.resp3 = resp3
	if setName {
		st.name = string(name)
	}
	st.mu.Unlock()
	proto := int64(2)
	if resp3 {
		proto = 3
	}
	c.out = appendMapHeader(c.out, resp3, 7)
	c.out = resp.AppendBulkString(c.out, "server")
	c.out = resp.AppendBulkString(c.out, "redis")
	c.out = resp.AppendBulkString(c.out, "version")
	c.out = resp.AppendBulkString(c.out, RedisVersion)
	c.out = resp.AppendBulkString(c.out, "proto")
	c.out = resp.AppendInt(c.out, proto)
	c.out = resp.AppendBulkString(c.out, "id")
	c.out = resp.AppendInt(c.out, st.id)
	c.out = resp.AppendBulkString(c.out, "mode")
	c.out = resp.AppendBulkString(c.out, "standalone")
	c.out = resp.AppendBulkString(c.out, "role")
	c.out = resp.AppendBulkString(c.out, "master")
	c.out = resp.AppendBulkString(c.out, "modules")
	c.out = resp.AppendArrayHeader(c.out, 0)
}

// auth answers AUTH [username] password, as Redis does for its default
// user: without COUNTERD_PASSWORD the one-argument form is an error and
// the default user takes any password.
func (c *session) auth(args [][]byte) {
	if len(args) > 3 {
		c.fail("ERR syntax error")
		return
	}
	if len(args) == 2 && c.s.opts.Password == "" {
		c.fail(errNoPassword)
		return
	}
	user, pass := []byte("default"), args[1]
	if len(args) == 3 {
		user, pass = args[1], args[2]
	}
	if !c.s.authOK(user, pass) {
		c.fail(errWrongPass)
		return
	}
	c.authenticated()
	c.out = resp.AppendOK(c.out)
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
