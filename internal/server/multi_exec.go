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
	"github.com/counterd/counterd/internal/store"
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
	var at []int                      // items[i] is queued command at[i]
	first := make([]int, len(t.cmds)) // each command's first item
	for i, cmd := range t.cmds {
		first[i] = len(items)
		// Keys are the transaction's own copies, alive until the reply.
		switch cmd.kind {
		case txIncr:
			k := cmd.keys[0]
			items = append(items, s.sample(unsafe.Slice(unsafe.StringData(k), len(k)), cmd.delta))
			at = append(at, i)
		case txSet:
			items = append(items, change.Change{Key: cmd.keys[0], Kind: change.Set, Delta: cmd.delta})
			at = append(at, i)
			if cmd.at != 0 {
				items = append(items, change.Change{Key: cmd.keys[0], Kind: change.Expire, Delta: cmd.at})
				at = append(at, i)
			}
		case txDel:
			for _, k := range cmd.keys {
				items = append(items, change.Change{Key: k, Kind: change.Set})
				at = append(at, i)
			}
		}
	}
	// A key a SET or DEL of the transaction replaces is read before the
	// transaction applies, and its reads worked out forward from there.
	pre, err := s.txPreRead(ctx, t)
	if err != nil {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, fmt.Sprintf("ERR read totals: %v; transaction discarded, nothing applied", err))
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
	reads := s.txReads(ctx, t, items, first, pre)
	out = resp.AppendArrayHeader(out, len(t.cmds))
	for i, cmd := range t.cmds {
		switch cmd.kind {
		case txIncr:
			out = resp.AppendInt(out, items[first[i]].Delta)
		case txSet:
			out = resp.AppendOK(out)
		case txDel:
			n := int64(0)
			for _, r := range reads[i] {
				if r.Overflow != nil || (r.err == "" && r.Total != 0) {
					n++
				}
			}
			out = resp.AppendInt(out, n)
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

// replaced returns the keys a SET or DEL of t replaces.
func (t *tx) replaced() map[string]bool {
	var set map[string]bool
	for _, cmd := range t.cmds {
		if cmd.kind == txSet || cmd.kind == txDel {
			if set == nil {
				set = map[string]bool{}
			}
			for _, k := range cmd.keys {
				set[k] = true
			}
		}
	}
	return set
}

// isRead reports whether a queued command of kind k reads its keys.
func isRead(k txKind) bool { return k == txGet || k == txMGet || k == txCount || k == txDel }

// txPreRead reads, before the transaction applies, the keys it both
// reads (DEL counts as a read) and replaces. Increments other connections
// make between this read and EXEC's are not in those reads.
func (s *Server) txPreRead(ctx context.Context, t *tx) (map[string]pending.Estimate, error) {
	repl := t.replaced()
	var names []string
	seen := map[string]bool{}
	for _, cmd := range t.cmds {
		if !isRead(cmd.kind) {
			continue
		}
		for _, k := range cmd.keys {
			if repl[k] && !seen[k] {
				seen[k] = true
				names = append(names, k)
			}
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	est, err := s.buf.Estimates(ctx, names)
	if err != nil {
		return nil, err
	}
	pre := make(map[string]pending.Estimate, len(names))
	for i, k := range names {
		pre[k] = est[i]
	}
	return pre, nil
}

// txReads answers the transaction's reads, indexed by command, each key as
// it is at the read's position in the transaction: it sees the
// transaction's changes queued before it and not those after it, as in
// Redis. A key no SET or DEL of the transaction replaces is read once,
// after the changes were accepted, and the later increments are taken
// off. A key one replaces is worked out forward from pre, since what a
// SET replaced cannot be taken off.
func (s *Server) txReads(ctx context.Context, t *tx, items []change.Change, first []int, pre map[string]pending.Estimate) [][]txRead {
	repl := t.replaced()
	var names []string
	index := map[string]int{}
	for _, cmd := range t.cmds {
		if isRead(cmd.kind) {
			for _, k := range cmd.keys {
				if _, ok := index[k]; !ok && !repl[k] {
					index[k] = len(names)
					names = append(names, k)
				}
			}
		}
	}
	reads := make([][]txRead, len(t.cmds))
	var est []pending.Estimate
	var err error
	if len(names) > 0 {
		rctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		est, err = s.buf.Estimates(rctx, names)
		cancel()
	}
	later := map[string]pending.Estimate{} // what increments after the read add
	for i := len(t.cmds) - 1; i >= 0; i-- {
		cmd := t.cmds[i]
		switch {
		case cmd.kind == txIncr:
			if repl[cmd.keys[0]] {
				continue
			}
			it := items[first[i]]
			l := later[cmd.keys[0]]
			// Within int64: AddAll accepted every pending delta.
			l.Total += it.Delta
			l.Var += it.Var
			later[cmd.keys[0]] = l
			continue
		case !isRead(cmd.kind):
			continue
		}
		reads[i] = make([]txRead, len(cmd.keys))
		for n, k := range cmd.keys {
			if repl[k] {
				continue // forward, below
			}
			r := &reads[i][n]
			if err != nil {
				r.err = fmt.Sprintf("ERR read totals: %v", err)
				continue
			}
			e, l := est[index[k]], later[k]
			if e.Overflow != nil {
				r.Estimate, r.err = e, fmt.Sprintf("ERR read totals: %v", e.Overflow)
				continue
			}
			total, ok := subChecked(e.Total, l.Total)
			if !ok {
				*r = beyondInt64(k)
				continue
			}
			r.Estimate = pending.Estimate{Total: total, Var: max(e.Var-l.Var, 0), Expires: e.Expires}
		}
	}
	if len(pre) == 0 {
		return reads
	}
	cur := make(map[string]txRead, len(pre))
	for k, e := range pre {
		cur[k] = txRead{Estimate: e}
		if e.Overflow != nil {
			cur[k] = txRead{Estimate: e, err: fmt.Sprintf("ERR read totals: %v", e.Overflow)}
		}
	}
	for i, cmd := range t.cmds {
		switch cmd.kind {
		case txIncr:
			k := cmd.keys[0]
			r, ok := cur[k]
			if !ok {
				continue
			}
			it := items[first[i]]
			if r.Overflow != nil {
				continue // beyond int64 before it: reported as that
			}
			if sum, ok := addInt(r.Total, it.Delta); ok {
				r.Total = sum
				r.Var += it.Var
			} else if r.err == "" {
				r = beyondInt64(k)
			}
			cur[k] = r
		case txSet:
			if _, ok := cur[cmd.keys[0]]; ok {
				cur[cmd.keys[0]] = txRead{Estimate: pending.Estimate{Total: cmd.delta, Expires: cmd.at * 1000}}
			}
		}
		if !isRead(cmd.kind) {
			continue
		}
		for n, k := range cmd.keys {
			if r, ok := cur[k]; ok {
				reads[i][n] = r
				if cmd.kind == txDel {
					cur[k] = txRead{}
				}
			}
		}
	}
	return reads
}

// beyondInt64 is the read of key k whose total passed int64 at its
// position in the transaction.
func beyondInt64(k string) txRead {
	err := fmt.Errorf("total of %q at this point of the transaction: %w", k, store.ErrOverflow)
	return txRead{Estimate: pending.Estimate{Overflow: err}, err: "ERR read totals: " + err.Error()}
}

func addInt(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
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
