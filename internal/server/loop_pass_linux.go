package server

import (
	"errors"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

// lconn is one connection served by a loop.
type lconn struct {
	fd   int
	sess *session
	rd   *resp.Reader

	fresh    bool // not yet registered with the loop
	queued   bool // in the loop's ready list
	readable bool // epoll reported input not read yet (edge-triggered)
	// hup: epoll reported the peer's hang-up (or an error). Its end of
	// file is read after the data before it, however short that read.
	hup    bool
	busy   bool // a goroutine runs its command; the loop keeps off
	closed bool
	// doomed: close was asked while busy; the loop closes it when its
	// command comes back (the goroutine still uses the session).
	doomed bool
	// cmd is the command a scan stopped at, parsed and not yet run; its
	// arguments alias rd's buffer.
	cmd [][]byte
	// quit ends the connection once pend is written: QUIT, a protocol
	// error, or a command's error. ended: the client's side is done
	// (EOF or a read error).
	quit  error
	ended bool
	// pend is the replies the client has not taken yet; since is when it
	// last took some, for Options.WriteTimeout.
	pend    []byte
	since   time.Time
	wantOut bool // EPOLLOUT registered
	// more says the last scan stopped with work left: a command to run,
	// or input to read once its group was accepted.
	more   bool
	g0, g1 int // the connection's group within the pass's batch
}

// fdReader reads a loop connection's socket without blocking.
type fdReader struct{ c *lconn }

func newFDReader(c *lconn) *resp.Reader { return c.sess.newReader(fdReader{c}) }

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(r.c.fd, p)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			r.c.readable = false
			return 0, resp.ErrWouldBlock
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		case n < len(p) && !r.c.hup:
			// A short read drained the socket: edge-triggered epoll
			// reports the next arrival, so no read is wasted finding
			// nothing. Not after a hang-up: it came in the same event as
			// the data, no event follows it, and its end of file must
			// still be read, or the connection is never closed.
			r.c.readable = false
		}
		return n, nil
	}
}

// paused reports whether c has so many replies unsent that it must not
// read or run anything more (session.readStop, as the outbox's).
func (l *eloop) paused(c *lconn) bool { return c.sess.readStop(len(c.pend)) }

// pass runs one pass over the connections marked ready.
func (l *eloop) pass() {
	work := l.ready
	l.ready = l.work[:0]
	l.work = work
	batch := l.batch[:0]
	for _, c := range work {
		c.queued = false
		if c.closed || c.busy {
			continue
		}
		l.scan(c)
		if len(c.sess.group) > 0 {
			batch = append(batch, c)
		}
	}
	l.batch = batch
	if len(batch) > 0 {
		l.endGroups(batch)
	}
	for _, c := range work {
		if c.closed || c.busy {
			continue
		}
		if c.cmd != nil {
			l.runCmd(c)
			if c.busy || c.closed {
				continue
			}
		}
		l.finish(c)
	}
	clear(work)
	clear(batch)
}

// scan reads c once if it has nothing buffered, and parses its buffered
// increments into its group, stopping at the first other command.
func (l *eloop) scan(c *lconn) {
	sess := c.sess
	c.more = false
	for c.cmd == nil && c.quit == nil && !l.paused(c) {
		args, ok, err := c.rd.Next()
		if err != nil {
			sess.protocolError(err)
			c.quit = err // answered once the group is (finish)
			return
		}
		if !ok {
			// Fill moves the buffer, which the group's keys alias: read
			// again only with no group pending (next pass otherwise).
			if c.ended || !c.readable || l.draining.Load() {
				return
			}
			if len(sess.group) > 0 {
				c.more = true
				return
			}
			if err := c.rd.Fill(); err != nil {
				if !errors.Is(err, resp.ErrWouldBlock) {
					c.ended = true
				}
				return
			}
			sess.conn.touch(l.s.reg.now())
			continue
		}
		if sess.fastPath(args) {
			l.s.m.commands.Inc()
			continue
		}
		c.cmd = args
		c.more = true // more may be buffered after it
	}
}

// endGroups accepts the groups of the pass's connections with one
// AddGroup call, which is one journal record, and appends their replies.
// Checking the concatenation is checking each group after the previous
// one, so per-item errors are what separate calls would give.
func (l *eloop) endGroups(batch []*lconn) {
	s := l.s
	items := l.items[:0]
	for _, c := range batch {
		c.g0 = len(items)
		items = append(items, c.sess.group...)
		c.g1 = len(items)
	}
	if cap(l.errs) < len(items) {
		l.errs = make([]error, len(items))
	}
	errs := l.errs[:len(items)]
	t, err := l.shard.AddGroup(items, errs)
	s.unreserve(items, errs, err)
	wait := err == nil && s.needsConfirm(t)
	for _, c := range batch {
		commit := err == nil && c.sess.groupCommit
		if !wait && !commit {
			c.sess.groupReplies(errs[c.g0:c.g1], err)
			continue
		}
		l.confirm(c, t, append([]error(nil), errs[c.g0:c.g1]...), commit)
	}
	clear(items)
	clear(errs)
	l.items = items[:0]
	if cap(items) > maxKeptBatch {
		// A burst from many connections at once: do not keep its room.
		l.items, l.errs = nil, nil
	}
}

// maxKeptBatch is the most increments a loop keeps room for between
// passes (48 bytes each, and an error slot).
const maxKeptBatch = 16 << 10

// confirm waits for t's durability or commit (commit: c's group holds
// SADD or SREM, see confirmGroup) on a goroutine, then answers c's group
// and runs the command its scan stopped at, if any.
func (l *eloop) confirm(c *lconn, t pending.Ticket, errs []error, commit bool) {
	c.busy = true
	go func() {
		err := l.s.confirmGroup(l.ctx, t, commit)
		c.sess.groupReplies(errs, err)
		if c.cmd != nil {
			c.quit = c.sess.exec(l.ctx, c.cmd)
			c.cmd = nil
		}
		l.send(c)
	}()
}

// runCmd runs the command c's scan stopped at: on the loop unless the
// table marks it blocking (session.blocks), else on a goroutine.
func (l *eloop) runCmd(c *lconn) {
	args := c.cmd
	if !c.sess.blocks(args) {
		c.cmd = nil
		l.after(c, c.sess.exec(l.ctx, args))
		return
	}
	c.busy = true
	go func() {
		c.quit = c.sess.exec(l.ctx, args)
		c.cmd = nil
		l.send(c)
	}()
}

// after handles the end of one command on c. The output limit counts
// every reply held for the client: those the socket has not taken (pend)
// and those not yet written.
func (l *eloop) after(c *lconn, quit error) {
	if quit != nil && c.quit == nil {
		c.quit = quit
	}
	if c.sess.overLimit(len(c.pend)) {
		c.sess.resetOut() // what was accepted is journaled, not answered
		l.close(c)
	}
}

// back takes c from the goroutine that ran its command and writes that
// command's replies before c reads again, as finish does after a command
// run on the loop. Kept until the pass's end, a pipeline of blocking
// commands (GET, MGET...) ran one after another without a write: their
// replies grew where neither the read stop at half the output limit
// (paused) nor the write timeout saw them. It reports false if it closed c.
func (l *eloop) back(c *lconn) bool {
	l.after(c, c.quit)
	if c.closed {
		return false
	}
	if len(c.sess.out) > 0 {
		return l.write(c)
	}
	return true
}

// finish writes c's replies, then closes it or queues it for the next
// pass if it has more to do.
func (l *eloop) finish(c *lconn) {
	sess := c.sess
	if err, ok := c.quit.(*resp.ProtocolError); ok {
		sess.protocolReply(err)
		c.quit = errQuit // answered once
	}
	if len(sess.out) > 0 && !l.write(c) {
		return
	}
	switch {
	case c.quit == nil && c.more:
		if !l.paused(c) {
			l.mark(c)
		} // else flushPend brings it back
	case sess.settle(c.quit, c.ended || l.draining.Load()): // else idle: no command of this pass is in use
		if len(c.pend) == 0 {
			l.close(c)
		} // else flushPend brings it back
	}
}

// write sends c's replies, keeping what the socket does not take in pend
// for EPOLLOUT. It reports false if it closed c.
func (l *eloop) write(c *lconn) bool {
	sess := c.sess
	defer sess.resetOut()
	if len(c.pend) > 0 {
		c.pend = append(c.pend, sess.out...)
		return true
	}
	n, err := writeFD(c.fd, sess.out)
	if err != nil {
		l.close(c)
		return false
	}
	if n < len(sess.out) {
		c.pend = append(c.pend, sess.out[n:]...)
		c.since = l.s.reg.now()
		l.wantOutput(c, true)
	}
	return true
}

// flushPend writes what c's client did not take before, now that epoll
// says it has room.
func (l *eloop) flushPend(c *lconn) {
	n, err := writeFD(c.fd, c.pend)
	if err != nil {
		l.close(c)
		return
	}
	if n > 0 {
		c.since = l.s.reg.now()
	}
	c.pend = c.pend[:copy(c.pend, c.pend[n:])]
	if len(c.pend) == 0 {
		if cap(c.pend) > maxKeptOut {
			c.pend = nil // the client caught up: keep no large buffer
		}
		l.wantOutput(c, false)
	}
	if !l.paused(c) {
		l.mark(c) // resume reading, or close once answered
	}
}

// writeFD writes b to fd, returning how much the socket took; a full
// socket is not an error.
func writeFD(fd int, b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, err := unix.Write(fd, b[done:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return done, nil
		case err != nil:
			return done, err
		}
		done += n
	}
	return done, nil
}

// wantOutput turns EPOLLOUT on or off for c: on only while replies wait,
// since a unix socket reports room every time its peer reads.
func (l *eloop) wantOutput(c *lconn, on bool) {
	if c.wantOut == on {
		return
	}
	c.wantOut = on
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(c.fd)}
	if on {
		ev.Events |= unix.EPOLLOUT
	}
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev)
}

// writeTimeouts closes connections whose client took none of its replies
// within Options.WriteTimeout, whether or not a goroutine runs a command
// of theirs now: a pipeline of blocking commands keeps its connection
// busy most of the time.
func (l *eloop) writeTimeouts(now time.Time) {
	for _, c := range l.conns {
		if len(c.pend) == 0 || c.doomed || now.Sub(c.since) < l.s.opts.WriteTimeout {
			continue
		}
		c.sess.writeTimedOut(len(c.pend))
		l.close(c)
	}
}

// close ends c. A busy connection is shut down at once, so its client
// sees the end and its unsent replies are let go, but its descriptor is
// closed when it comes back: its goroutine still runs a command on its
// session, the descriptor must not be reused under it, and Serve must not
// return (nor the loop's descriptors close) before that command ends. The
// goroutine never touches the socket: only the loop reads and writes it.
func (l *eloop) close(c *lconn) {
	if c.closed {
		return
	}
	if c.busy {
		if !c.doomed {
			c.doomed = true
			c.pend = nil
			_ = unix.Shutdown(c.fd, unix.SHUT_RDWR)
		}
		return
	}
	c.closed = true
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	unix.Close(c.fd)
	delete(l.conns, c.fd)
	l.s.removeSession(c.sess)
	l.s.loopConnDone()
}
