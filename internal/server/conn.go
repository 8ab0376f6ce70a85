package server

import (
	"fmt"
	"strings"

	"github.com/counterd/counterd/internal/resp"
)

// connCommand checks a command against the command table before it runs,
// as Redis does: an unknown name, a wrong number of arguments, then a
// connection that has not authenticated get an error. It answers the
// commands that depend on the connection (its protocol, name, password)
// and reports whether it answered; the rest are Server.exec's.
func (c *session) connCommand(args [][]byte) bool {
	spec := lookup(args[0])
	if spec == nil {
		c.fail(unknown(args))
		return true
	}
	c.conn.lastCmd.Store(spec)
	if !spec.arityOK(len(args)) {
		c.fail(arityError(spec.name))
		return true
	}
	if c.conn.needAuth && !spec.has("no_auth") {
		c.fail("NOAUTH Authentication required.")
		return true
	}
	if len(spec.subs) > 0 && len(args) > 1 {
		sub := spec.sub(args[1])
		switch {
		case sub == nil:
			c.fail(unknownSub(spec, args[1]))
			return true
		case !sub.arityOK(len(args)): // a subcommand's arity counts the container's name
			c.fail(arityError(sub.name))
			return true
		}
		c.conn.lastCmd.Store(sub)
		spec = sub
	}
	switch spec.name {
	case "hello":
		c.hello(args)
	case "auth":
		c.auth(args)
	case "reset":
		c.reset()
	case "select":
		c.selectDB(args[1])
	case "echo":
		c.out = resp.AppendBulk(c.out, args[1])
	case "time":
		c.out = appendTime(c.out, c.s.reg.now())
	case "dbsize":
		c.out = resp.AppendInt(c.out, int64(c.s.buf.PendingKeys()))
	case "info":
		c.out = appendText(c.out, c.conn.resp3, c.s.info(args[1:]))
	case "config|get":
		c.configGet(args[2:])
	case "command", "command|count", "command|docs", "command|info", "command|list":
		c.command(spec, args)
	default:
		if strings.HasPrefix(spec.name, "client|") {
			c.client(spec, args)
			return true
		}
		return false
	}
	return true
}

// fail appends an error reply and counts it.
func (c *session) fail(msg string) {
	c.s.m.commandErrors.Inc()
	c.out = resp.AppendError(c.out, msg)
}

func arityError(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// unknownSub names the subcommands counterd has, since it has no HELP.
func unknownSub(spec *cmdSpec, sub []byte) string {
	names := make([]string, len(spec.subs))
	for i, s := range spec.subs {
		_, n, _ := strings.Cut(s.name, "|")
		names[i] = strings.ToUpper(n)
	}
	return fmt.Sprintf("ERR unknown subcommand '%s'. counterd's %s has %s",
		clip(sub), strings.ToUpper(spec.name), strings.Join(names, ", "))
}

// reset answers RESET as Redis does: the connection returns to the state
// it connected in (no transaction, RESP2, no name and, with
// COUNTERD_PASSWORD, not authenticated) and replies +RESET. Client pools
// send it when a connection is given back. The library name and version
// stay, as in Redis: they still describe the client.
func (c *session) reset() {
	c.tx = nil
	st := &c.conn
	st.mu.Lock()
	st.resp3 = false
	st.name = ""
	st.mu.Unlock()
	st.needAuth = c.s.opts.Password != ""
	c.out = resp.AppendSimple(c.out, "RESET")
}
