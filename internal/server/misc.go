package server

import (
	"context"
	"strconv"
	"time"

	"github.com/counterd/counterd/internal/resp"
)

// selectDB answers SELECT: counterd has database 0 only.
func (c *session) selectDB(_ context.Context, args [][]byte) error {
	n, ok := resp.ParseInt(args[1])
	switch {
	case !ok:
		c.fail(errNotInt)
	case n != 0:
		c.fail("ERR DB index is out of range (counterd has only database 0)")
	default:
		c.out = resp.AppendOK(c.out)
	}
	return nil
}

// appendTime appends TIME's reply: seconds and microseconds, as two bulk
// strings in both protocols.
func appendTime(dst []byte, t time.Time) []byte {
	var b [20]byte
	dst = resp.AppendArrayHeader(dst, 2)
	dst = resp.AppendBulk(dst, strconv.AppendInt(b[:0], t.Unix(), 10))
	return resp.AppendBulk(dst, strconv.AppendInt(b[:0], int64(t.Nanosecond()/1000), 10))
}

// configGet answers CONFIG GET with an empty value for each name:
// counterd has no Redis configuration, and redis-benchmark asks for save
// and appendonly on start. A map in RESP3.
func (c *session) configGet(_ context.Context, args [][]byte) error {
	names := args[2:]
	c.out = appendMapHeader(c.out, c.conn.resp3, len(names))
	for _, p := range names {
		c.out = resp.AppendBulk(c.out, p)
		c.out = resp.AppendBulkString(c.out, "")
	}
	return nil
}
