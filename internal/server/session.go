package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/resp"
)

// Buffer sizes. An idle connection holds only small buffers; they grow
// for a large command or a large batch of replies and are given back once
// drained, so thousands of idle connections cost little.
const (
	// readBufSize is the read buffer a connection starts with; resp.Reader
	// grows it only for a command that does not fit, and shrinks it back
	// once drained.
	readBufSize = 4 << 10
	// outStartSize is the reply buffer a connection starts with: enough
	// for a few pipelined replies.
	outStartSize = 512
	// maxPendingOut is the reply bytes past which replies are written
	// between commands rather than after the whole batch. The connection
	// reads nothing more until the write completes, which bounds a
	// pipelining client's replies in memory (a 64 KiB burst of HOT would
	// otherwise build hundreds of MB) and pushes back on a client that
	// does not read.
	maxPendingOut = 64 << 10
	// maxKeptOut is the largest reply buffer kept after a write.
	maxKeptOut = 16 << 10
)

// session is one connection's state between reads.
type session struct {
	s   *Server
	out []byte
	// group holds the run of increments read since the last other
	// command; they are journaled as one record and answered together.
	group []change.Change
	errs  []error
	// groupCommit is set when the group holds a change whose reply is
	// what its round decides (SADD, SREM): the group waits for the commit.
	groupCommit bool
	// conn is the connection's protocol, name and authentication.
	conn connState
	// rd reads the connection's commands; only the goroutine serving the
	// connection touches it (input.go).
	rd *resp.Reader
	tx *tx // the open MULTI transaction, if any (multi.go)
	// ob writes the replies a client does not take at once (outbox.go).
	ob outbox
}

// errQuit ends a session after its replies are written.
var errQuit = errors.New("client quit")

// session answers c's commands until the client quits or disconnects, a
// protocol error, or shutdown. Each buffered command is answered before
// reading again; the group of increments is always ended (journaled and
// folded) before any reply after it is written, and before the read
// buffer its keys alias is reused.
func (s *Server) session(ctx context.Context, c net.Conn) error {
	sess := s.newSession(c)
	rd := sess.newReader(c)
	defer s.removeSession(sess)
	defer sess.ob.close() // before the connection is closed
	for {
		var quit error
		for quit == nil {
			args, ok, err := rd.Next()
			if err != nil {
				sess.protocolError(err)
				sess.endGroup(ctx)
				sess.protocolReply(err)
				quit = err
				break
			}
			if !ok {
				break
			}
			quit = sess.exec(ctx, args)
			if len(sess.out) >= maxPendingOut {
				sess.endGroup(ctx)
				// Below maxPendingOut c.out and the outbox's at most half
				// the limit (write waits for that) are within the limit.
				if sess.overLimit(sess.ob.held()) {
					return errOutputLimit // what was accepted is journaled, not answered
				}
				if err := sess.write(c); err != nil {
					return err
				}
			}
		}
		sess.endGroup(ctx)
		if err := sess.write(c); err != nil {
			return err
		}
		// Draining, what was read is answered; the rest is not ours.
		if sess.settle(quit, s.draining()) {
			return quit
		}
		if err := rd.Fill(); err != nil {
			switch {
			case errors.Is(err, io.EOF):
				return nil
			case errors.Is(err, os.ErrDeadlineExceeded) && s.draining():
				return nil // woken by shutdown
			}
			return fmt.Errorf("read: %w", err)
		}
		sess.conn.touch(s.reg.now())
	}
}
