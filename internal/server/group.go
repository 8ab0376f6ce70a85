package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

// endGroup accepts the pending group and appends its replies, in order.
func (c *session) endGroup(ctx context.Context) {
	if len(c.group) == 0 {
		return
	}
	s := c.s
	if cap(c.errs) < len(c.group) {
		c.errs = make([]error, len(c.group))
	}
	errs := c.errs[:len(c.group)]
	t, err := s.buf.AddGroup(c.group, errs)
	s.unreserve(c.group, errs, err) // TAKEs whose grant was not journaled
	if err == nil {
		err = s.confirmGroup(ctx, t, c.groupCommit)
	}
	c.groupReplies(errs, err)
}

// groupReplies appends the replies of the pending group, which AddGroup
// answered with errs (per item) and err (for the whole group), and
// empties the group.
func (c *session) groupReplies(errs []error, err error) {
	s := c.s
	for i, it := range c.group {
		switch {
		case err != nil:
			if r := commands.replies[it.Kind]; r != nil && errs[i] == nil && accepted(err) {
				r(s, it, false) // journaled, not confirmed: the kind may keep that
			}
			c.out = resp.AppendError(c.out, groupError(err))
		case errs[i] != nil:
			s.m.commandErrors.Inc()
			c.out = resp.AppendError(c.out, itemError(errs[i]))
		case commands.replies[it.Kind] != nil:
			n, msg := commands.replies[it.Kind](s, it, true)
			if msg != "" {
				s.m.commandErrors.Inc()
				c.out = resp.AppendError(c.out, msg)
				continue
			}
			c.out = resp.AppendInt(c.out, n)
		default:
			c.out = resp.AppendInt(c.out, it.Delta)
		}
	}
	if err != nil {
		s.m.commandErrors.Add(len(c.group))
	}
	clear(c.group) // drop references to the read buffer
	c.group = c.group[:0]
	c.groupCommit = false
}

// accepted reports whether a group that confirm answered err was still
// accepted: journaled and to be counted, only not confirmed in time.
func accepted(err error) bool {
	return errors.Is(err, errNotDurable) || errors.Is(err, errNotCommitted)
}

// maxKeptGroup is the most increments an idle connection keeps room for:
// a pipelining client's group can grow to thousands (48 bytes each, and
// an error slot), which idle connections need not hold.
const maxKeptGroup = 256

// settle is what a connection does once it has answered everything it
// read and written the replies (handed them to the socket, or kept what
// the socket did not take): it ends (true) if the client quit or the
// connection must (quit: QUIT, a protocol error, a command's error;
// done: the client closed its side, or the server drains), else it
// idles until more input. A connection served by a goroutine and one
// served by a loop both settle this way.
func (c *session) settle(quit error, done bool) bool {
	if quit != nil || done {
		return true
	}
	c.idle()
	return false
}

// idle gives back what a connection grew for a burst once it waits for
// input with nothing buffered: its read buffer and its group's room. The
// caller ensures no command read so far is in use.
func (c *session) idle() {
	if !c.rd.Shrink() {
		return
	}
	if cap(c.group) > maxKeptGroup {
		c.group = nil
	}
	if cap(c.errs) > maxKeptGroup {
		c.errs = nil
	}
}

// needsConfirm reports whether confirm may wait for t.
func (s *Server) needsConfirm(t pending.Ticket) bool {
	return (s.opts.AckCommit && t.Recorded > 0) || !s.buf.DurableOnAppend()
}

// errNotCommitted is an accepted group whose commit was not confirmed in
// time under COUNTERD_ACK=commit.
var errNotCommitted = errors.New("not confirmed committed")

// errNotDurable is an accepted group, appended to the journal and folded
// into the pending buffer, whose fsync was not confirmed in time or failed
// (COUNTERD_FSYNC=always). It will be counted, so the client must not
// retry it.
var errNotDurable = errors.New("not confirmed durable")

// confirm waits for what the acknowledgement mode promises.
func (s *Server) confirm(ctx context.Context, t pending.Ticket) error {
	waitCommit := s.opts.AckCommit && t.Recorded > 0
	if !waitCommit && s.buf.DurableOnAppend() {
		return nil // the common case, without a timer per group
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	if err := s.buf.WaitDurable(ctx, t); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w within %s", errNotDurable, s.opts.Timeout)
		}
		return fmt.Errorf("%w: fsync failed: %w", errNotDurable, err)
	}
	if waitCommit {
		if err := s.buf.WaitCommitted(ctx, t.Seq); err != nil {
			return fmt.Errorf("%w within %s: %w", errNotCommitted, s.opts.Timeout, err)
		}
	}
	return nil
}

// confirmGroup is confirm, and for a group whose replies are what its
// round decides (commit: SADD, SREM) it then waits for that round's
// commit (WaitCommitted kicks the round), whatever COUNTERD_ACK says.
func (s *Server) confirmGroup(ctx context.Context, t pending.Ticket, commit bool) error {
	if err := s.confirm(ctx, t); err != nil || !commit {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	if err := s.buf.WaitCommitted(ctx, t.Seq); err != nil {
		return fmt.Errorf("%w within %s: %w", errNotCommitted, s.opts.Timeout, err)
	}
	return nil
}

func groupError(err error) string {
	switch {
	case errors.Is(err, journal.ErrFull):
		return "BUSY journal full of unflushed increments (database unreachable?); nothing accepted, back off and retry"
	case errors.Is(err, errNotCommitted):
		return "TIMEOUT increment journaled but " + err.Error() + "; it will be committed when the database answers"
	case errors.Is(err, errNotDurable):
		// AddGroup succeeded: the record is in the journal and the
		// pending buffer, so "nothing accepted" would make a retry count
		// twice.
		return "TIMEOUT increment journaled but " + err.Error() + "; it is accepted and will be counted, do not retry"
	}
	return "ERR journal write failed, nothing accepted: " + err.Error()
}

func itemError(err error) string {
	switch {
	case errors.Is(err, pending.ErrBackoff):
		return "BUSY " + err.Error()
	case errors.Is(err, pending.ErrOverflow):
		return "ERR " + err.Error()
	}
	// A journal failure part-way through a group the accumulator took in
	// pieces (see pending's shard.go): this item and the rest were not
	// accepted.
	return groupError(err)
}
