package server

import (
	"errors"
	"io"

	"github.com/counterd/counterd/internal/resp"
)

// Input limits, as Redis's client-query-buffer-limit and its limits on
// unauthenticated clients: a connection's read buffer holds at most one
// command, so bounding the command bounds the buffer. Before AUTH (with
// Options.Password set) the bound is resp.UnauthenticatedLimits(), a few KiB, so
// clients that do not know the password cannot make the daemon hold much.

// limits is what a connection may send now.
func (c *session) limits() resp.Limits {
	if c.conn.needAuth {
		return resp.UnauthenticatedLimits()
	}
	return resp.Limits{Command: c.s.opts.QueryLimit}
}

// newReader returns the connection's command reader, bounded by the
// session's limits.
func (c *session) newReader(r io.Reader) *resp.Reader {
	c.rd = resp.NewReader(r, readBufSize)
	c.rd.SetLimits(c.limits())
	return c.rd
}

// authenticated records a successful AUTH or HELLO ... AUTH and lifts the
// unauthenticated limits.
func (c *session) authenticated() {
	c.conn.needAuth = false
	if c.rd != nil {
		c.rd.SetLimits(c.limits())
	}
}

// protocolReply answers a command the connection could not send whole
// (malformed, or past a size limit; protocolError counted it), once the
// group before it has its replies; the connection then ends. A connection
// served by a goroutine and one served by a loop both end this way.
func (c *session) protocolReply(err error) {
	c.out = resp.AppendError(c.out, "ERR "+err.Error())
}

// protocolError counts a malformed or oversized command that ends the
// connection, and logs one past a size limit: the client is probably
// sending something it should not, or the limit is too low for it.
func (c *session) protocolError(err error) {
	c.s.m.protocolErrors.Inc()
	var pe *resp.ProtocolError
	if !errors.As(err, &pe) || pe.Limit == 0 {
		return
	}
	if c.conn.needAuth {
		c.s.opts.Logger.Warn("closing connection: request too big before AUTH",
			"conn", c.conn.id, "limit", pe.Limit)
		return
	}
	if pe.Inline {
		c.s.opts.Logger.Warn("closing connection: inline command past the inline limit (send it as a RESP array)",
			"conn", c.conn.id, "limit", pe.Limit)
		return
	}
	c.s.opts.Logger.Warn("closing connection: command past COUNTERD_CLIENT_QUERY_BUFFER_LIMIT",
		"conn", c.conn.id, "limit", pe.Limit)
}
