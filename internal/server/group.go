package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

// session is one connection's state between reads.
type session struct {
	s   *Server
	out []byte
	// group holds the run of increments read since the last other
	// command; they are journaled as one record and answered together.
	group []change.Change
	errs  []error
}

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
	if err == nil {
		err = s.confirm(ctx, t)
	}
	for i, it := range c.group {
		switch {
		case err != nil:
			c.out = resp.AppendError(c.out, groupError(err))
		case errs[i] != nil:
			s.m.commandErrors.Inc()
			c.out = resp.AppendError(c.out, itemError(errs[i]))
		default:
			c.out = resp.AppendInt(c.out, it.Delta)
		}
	}
	if err != nil {
		s.m.commandErrors.Add(len(c.group))
	}
	clear(c.group) // drop references to the read buffer
	c.group = c.group[:0]
}

// errNotCommitted is an accepted group whose commit was not confirmed in
// time under COUNTERD_ACK=commit.
var errNotCommitted = errors.New("not confirmed committed")

// confirm waits for what the acknowledgement mode promises.
func (s *Server) confirm(ctx context.Context, t pending.Ticket) error {
	waitCommit := s.opts.AckCommit && t.Recorded > 0
	if !waitCommit && s.buf.DurableOnAppend() {
		return nil // the common case, without a timer per group
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	if err := s.buf.WaitDurable(ctx, t); err != nil {
		return fmt.Errorf("journal fsync: %w", err)
	}
	if waitCommit {
		if err := s.buf.WaitCommitted(ctx, t.Seq); err != nil {
			return fmt.Errorf("%w within %s: %w", errNotCommitted, s.opts.Timeout, err)
		}
	}
	return nil
}

func groupError(err error) string {
	switch {
	case errors.Is(err, journal.ErrFull):
		return "BUSY journal full of unflushed increments (database unreachable?); nothing accepted, back off and retry"
	case errors.Is(err, errNotCommitted):
		return "TIMEOUT increment journaled but " + err.Error() + "; it will be committed when the database answers"
	}
	return "ERR journal write failed, nothing accepted: " + err.Error()
}

func itemError(err error) string {
	if errors.Is(err, pending.ErrBackoff) {
		return "BUSY " + err.Error()
	}
	return "ERR " + err.Error()
}
