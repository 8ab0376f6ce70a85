package server

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hotness"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
)

// execTx runs the transaction EXEC ends and appends its reply: EXECABORT
// for a transaction with a refused command, an error saying nothing was
// applied, a TIMEOUT saying everything was applied but not confirmed, or
// the array of each queued command's reply, in order.
func (s *Server) execTx(ctx context.Context, out []byte, t *tx) []byte {
	if t.dirty {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, errExecAbort)
	}
	var items []change.Change
	var at []int // items[i] is queued command at[i]
	for i, cmd := range t.cmds {
		if cmd.kind == txIncr {
			// The key is the transaction's own copy, alive until the reply.
			k := cmd.keys[0]
			items = append(items, s.sample(unsafe.Slice(unsafe.StringData(k), len(k)), cmd.delta))
			at = append(at, i)
		}
	}
	if len(items) > 0 {
		errs := make([]error, len(items))
		tk, err := s.buf.AddAll(items, errs)
		if err == nil {
			err = s.confirm(ctx, tk)
		}
		if err != nil {
			s.m.commandErrors.Inc()
			return resp.AppendError(out, txError(err, errs, at))
		}
	}
	reads := s.txReads(ctx, t, items)
	out = resp.AppendArrayHeader(out, len(t.cmds))
	j := 0 // the next increment's index in items
	for i, cmd := range t.cmds {
		switch cmd.kind {
		case txIncr:
			out = resp.AppendInt(out, items[j].Delta)
			j++
		case txGet, txMGet:
			if cmd.kind == txMGet {
				out = resp.AppendArrayHeader(out, len(reads[i]))
			}
			for _, r := range reads[i] {
				if r.err != "" {
					s.m.commandErrors.Inc()
					out = resp.AppendError(out, r.err)
					continue
				}
				out = resp.AppendBulkInt(out, r.Total)
			}
		case txCount:
			r := reads[i][0]
			if r.err != "" {
				s.m.commandErrors.Inc()
				out = resp.AppendError(out, r.err)
				continue
			}
			out = appendCount(out, r.Estimate)
		case txHot:
			out = s.hot(out)
		case txPing:
			out = resp.AppendSimple(out, "PONG")
		case txPingMsg:
			out = resp.AppendBulkString(out, cmd.keys[0])
		case txUnwatch:
			out = resp.AppendOK(out)
		}
	}
	return out
}

// txRead is one key's value for a read queued in a transaction.
type txRead struct {
	pending.Estimate
	err string // the error reply instead, if any
}

// txReads answers the transaction's reads, indexed by command, each key as
// it is at the read's position in the transaction: it sees the
// transaction's increments queued before it and not those after it, as in
// Redis. All reads share one snapshot, taken after the increments were
// accepted, from which the later increments are taken off.
func (s *Server) txReads(ctx context.Context, t *tx, items []change.Change) [][]txRead {
	var names []string
	index := map[string]int{}
	for _, cmd := range t.cmds {
		if cmd.kind == txGet || cmd.kind == txMGet || cmd.kind == txCount {
			for _, k := range cmd.keys {
				if _, ok := index[k]; !ok {
					index[k] = len(names)
					names = append(names, k)
				}
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	est, err := s.buf.Estimates(ctx, names)
	reads := make([][]txRead, len(t.cmds))
	later := map[string]pending.Estimate{} // what increments after the read add
	j := len(items)
	for i := len(t.cmds) - 1; i >= 0; i-- {
		cmd := t.cmds[i]
		switch cmd.kind {
		case txIncr:
			j--
			l := later[cmd.keys[0]]
			// Within int64: AddAll accepted every pending delta.
			l.Total += items[j].Delta
			l.Var += items[j].Var
			later[cmd.keys[0]] = l
			continue
		case txGet, txMGet, txCount:
		default:
			continue
		}
		reads[i] = make([]txRead, len(cmd.keys))
		for n, k := range cmd.keys {
			r := &reads[i][n]
			if err != nil {
				r.err = fmt.Sprintf("ERR read totals: %v", err)
				continue
			}
			e, l := est[index[k]], later[k]
			total, ok := subChecked(e.Total, l.Total)
			if !ok {
				r.err = fmt.Sprintf("ERR read totals: total of %q at this point of the transaction is beyond int64", k)
				continue
			}
			r.Estimate = pending.Estimate{Total: total, Var: max(e.Var-l.Var, 0)}
		}
	}
	return reads
}

func subChecked(a, b int64) (int64, bool) {
	d := a - b
	if (b > 0 && d > a) || (b < 0 && d < a) {
		return 0, false
	}
	return d, true
}

// txError words why EXEC applied nothing, or, for a TIMEOUT, why it
// applied everything but cannot confirm it. errs and at name the refused
// increment when AddAll refused one.
func txError(err error, errs []error, at []int) string {
	const none = "transaction discarded, nothing applied"
	switch {
	case errors.Is(err, pending.ErrNotAll):
		for i, e := range errs {
			if e == nil {
				continue
			}
			code := "ERR"
			if errors.Is(e, pending.ErrBackoff) {
				code = "BUSY"
			}
			return fmt.Sprintf("%s %s: command %d of the transaction: %v", code, none, at[i]+1, e)
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

// appendCount appends COUNT's reply for e: [total, "exact" or
// "estimated", error95].
func appendCount(out []byte, e pending.Estimate) []byte {
	out = resp.AppendArrayHeader(out, 3)
	out = resp.AppendInt(out, e.Total)
	if e.Var == 0 {
		out = resp.AppendBulkString(out, "exact")
	} else {
		out = resp.AppendBulkString(out, "estimated")
	}
	return resp.AppendInt(out, hotness.Error95(e.Var))
}
