package server

import (
	"context"
	"time"

	"github.com/counterd/counterd/internal/resp"
)

// Connection commands: answered from the connection's own state or the
// server's, without waiting on anything.

// parsePing describes PING [message]: PONG, or the message.
func parsePing(args [][]byte, _ time.Time) (call, string) {
	switch len(args) {
	case 1:
		return call{reply: replyPong}, ""
	case 2:
		return call{arg: args[1], reply: replyArg}, ""
	}
	return call{}, arityError("ping")
}

func replyPong(_ *Server, out []byte, _ call, _ []read) []byte { return resp.AppendSimple(out, "PONG") }

func replyArg(_ *Server, out []byte, c call, _ []read) []byte { return resp.AppendBulk(out, c.arg) }

func (c *session) echo(_ context.Context, args [][]byte) error {
	c.out = resp.AppendBulk(c.out, args[1])
	return nil
}

// quit answers QUIT: OK, then the connection closes. Inside MULTI nothing
// of the transaction is applied.
func (c *session) quit(context.Context, [][]byte) error {
	c.tx = nil
	c.out = resp.AppendOK(c.out)
	return errQuit
}

// reset answers RESET as Redis does: the connection returns to the state
// it connected in (no transaction, RESP2, no name and, with
// COUNTERD_PASSWORD, not authenticated) and replies +RESET. Client pools
// send it when a connection is given back. The library name and version
// stay, as in Redis: they still describe the client.
func (c *session) reset(context.Context, [][]byte) error {
	c.tx = nil
	st := &c.conn
	st.mu.Lock()
	st.resp3 = false
	st.name = ""
	st.mu.Unlock()
	st.needAuth = c.s.opts.Password != ""
	c.out = resp.AppendSimple(c.out, "RESET")
	return nil
}

func (c *session) time(context.Context, [][]byte) error {
	c.out = appendTime(c.out, c.s.reg.now())
	return nil
}

// dbsize answers DBSIZE: the keys accepted and not yet flushed.
func (c *session) dbsize(context.Context, [][]byte) error {
	c.out = resp.AppendInt(c.out, int64(c.s.buf.PendingKeys()))
	return nil
}

func (c *session) infoCmd(_ context.Context, args [][]byte) error {
	c.out = appendText(c.out, c.conn.resp3, c.s.info(args[1:]))
	return nil
}
