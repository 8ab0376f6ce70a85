package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

// execTx runs the transaction EXEC ends, its queued calls as one batch
// (call.go), and appends its reply: EXECABORT for a transaction with a
// refused command, an error saying nothing was applied, a TIMEOUT saying
// everything was applied but not confirmed, or the array of each call's
// reply, in order.
func (s *Server) execTx(ctx context.Context, out []byte, t *tx) []byte {
	if t.dirty {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, errExecAbort)
	}
	b := batch{calls: t.calls}
	reads, ok := b.run(ctx, s)
	if !ok {
		s.m.commandErrors.Inc()
		if b.acceptErr != nil {
			return resp.AppendError(out, b.txError())
		}
		return resp.AppendError(out, fmt.Sprintf("ERR read totals: %v; transaction discarded, nothing applied", b.readErr))
	}
	out = resp.AppendArrayHeader(out, len(b.calls))
	for i, cl := range b.calls {
		out = cl.reply(s, out, cl, reads[i])
	}
	return out
}

// txError words why EXEC applied nothing, or, for a TIMEOUT, why it
// applied everything but cannot confirm it.
func (b *batch) txError() string {
	const none = "transaction discarded, nothing applied"
	err := b.acceptErr
	switch {
	case errors.Is(err, pending.ErrNotAll):
		for i, e := range b.errs {
			if e == nil {
				continue
			}
			code := "ERR"
			if errors.Is(e, pending.ErrBackoff) {
				code = "BUSY"
			}
			return fmt.Sprintf("%s %s: command %d of the transaction: %v", code, none, b.callOf(i)+1, e)
		}
		return "ERR " + none + ": an increment was refused"
	case errors.Is(err, journal.ErrFull):
		return "BUSY journal full of unflushed increments (database unreachable?); " + none + ", back off and retry"
	case errors.Is(err, errNotCommitted):
		return "TIMEOUT transaction journaled but " + err.Error() + "; it is applied and will be committed when the database answers, do not retry"
	case errors.Is(err, errNotDurable):
		return "TIMEOUT transaction journaled but " + err.Error() + "; it is applied and will be counted, do not retry"
	}
	return "ERR journal write failed, " + none + ": " + err.Error()
}
