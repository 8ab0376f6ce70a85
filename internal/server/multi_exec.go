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
	items, at, first := s.txItems(t)
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
	for i := range t.cmds {
		r := txResult{cmd: &t.cmds[i], items: items[first[i]:first[i+1]], reads: reads[i]}
		out = t.cmds[i].reply(s, out, r)
	}
	return out
}

// txItems returns the changes of t's commands, in order: at[j] is the
// command of items[j], and command i's are items[first[i]:first[i+1]].
func (s *Server) txItems(t *tx) (items []change.Change, at, first []int) {
	first = make([]int, len(t.cmds)+1)
	for i, cmd := range t.cmds {
		first[i] = len(items)
		// Keys are the transaction's own copies, alive until the reply.
		switch cmd.effect {
		case txIncr:
			k := cmd.keys[0]
			items = append(items, s.sample(unsafe.Slice(unsafe.StringData(k), len(k)), cmd.delta))
		case txSet:
			items = append(items, change.Change{Key: cmd.keys[0], Kind: change.Set, Delta: cmd.delta})
			if cmd.at != 0 {
				items = append(items, change.Change{Key: cmd.keys[0], Kind: change.Expire, Delta: cmd.at})
			}
		case txDel:
			for _, k := range cmd.keys {
				items = append(items, change.Change{Key: k, Kind: change.Set})
			}
		}
		for range len(items) - first[i] {
			at = append(at, i)
		}
	}
	first[len(t.cmds)] = len(items)
	return items, at, first
}

// txResult is what a queued command's reply is made of.
type txResult struct {
	cmd   *txCmd
	items []change.Change // its changes, as accepted (an increment's is sampled)
	reads []txRead        // its keys' values at its position, if it reads them
}

// The replies of queued commands (txCmd.reply).

func replyIncr(_ *Server, out []byte, r txResult) []byte {
	return resp.AppendInt(out, r.items[0].Delta)
}
func replyOK(_ *Server, out []byte, _ txResult) []byte   { return resp.AppendOK(out) }
func replyPong(_ *Server, out []byte, _ txResult) []byte { return resp.AppendSimple(out, "PONG") }
func replyMsg(_ *Server, out []byte, r txResult) []byte  { return resp.AppendBulkString(out, r.cmd.msg) }
func replyHot(s *Server, out []byte, _ txResult) []byte  { return s.appendHot(out) }

// replyDel counts the keys that were not 0 at DEL's position.
func replyDel(_ *Server, out []byte, r txResult) []byte {
	n := int64(0)
	for _, rd := range r.reads {
		if rd.Overflow != nil || (rd.err == "" && rd.Total != 0) {
			n++
		}
	}
	return resp.AppendInt(out, n)
}

func replyGet(s *Server, out []byte, r txResult) []byte { return s.appendReads(out, r.reads) }

func replyMGet(s *Server, out []byte, r txResult) []byte {
	return s.appendReads(resp.AppendArrayHeader(out, len(r.reads)), r.reads)
}

// appendReads appends each read's total, or its error.
func (s *Server) appendReads(out []byte, reads []txRead) []byte {
	for _, r := range reads {
		if r.err != "" {
			s.m.commandErrors.Inc()
			out = resp.AppendError(out, r.err)
			continue
		}
		out = resp.AppendBulkInt(out, r.Total)
	}
	return out
}

func replyCount(s *Server, out []byte, r txResult) []byte {
	if rd := r.reads[0]; rd.err != "" {
		s.m.commandErrors.Inc()
		return resp.AppendError(out, rd.err)
	}
	return appendCount(out, r.reads[0].Estimate)
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
		if !cmd.replaces() {
			continue
		}
		if set == nil {
			set = map[string]bool{}
		}
		for _, k := range cmd.keys {
			set[k] = true
		}
	}
	return set
}

// readKeys returns, once each and in order, the keys t's commands read
// for which keep is true.
func (t *tx) readKeys(keep func(string) bool) []string {
	var names []string
	seen := map[string]bool{}
	for _, cmd := range t.cmds {
		if !cmd.reads() {
			continue
		}
		for _, k := range cmd.keys {
			if keep(k) && !seen[k] {
				seen[k] = true
				names = append(names, k)
			}
		}
	}
	return names
}

// txPreRead reads, before the transaction applies, the keys it both
// reads (DEL counts as a read) and replaces. Increments other connections
// make between this read and EXEC's are not in those reads.
func (s *Server) txPreRead(ctx context.Context, t *tx) (map[string]pending.Estimate, error) {
	repl := t.replaced()
	names := t.readKeys(func(k string) bool { return repl[k] })
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
// off (readBack). A key one replaces is worked out forward from pre, since
// what a SET replaced cannot be taken off (readForward).
func (s *Server) txReads(ctx context.Context, t *tx, items []change.Change, first []int, pre map[string]pending.Estimate) [][]txRead {
	repl := t.replaced()
	names := t.readKeys(func(k string) bool { return !repl[k] })
	index := make(map[string]int, len(names))
	for i, k := range names {
		index[k] = i
	}
	var est []pending.Estimate
	var err error
	if len(names) > 0 {
		rctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		est, err = s.buf.Estimates(rctx, names)
		cancel()
	}
	reads := make([][]txRead, len(t.cmds))
	for i, cmd := range t.cmds {
		if cmd.reads() {
			reads[i] = make([]txRead, len(cmd.keys))
		}
	}
	b := txBack{repl: repl, est: est, index: index, err: err, later: map[string]pending.Estimate{}}
	for i := len(t.cmds) - 1; i >= 0; i-- {
		b.step(&t.cmds[i], items[first[i]:first[i+1]], reads[i])
	}
	if len(pre) > 0 {
		readForward(t, items, first, pre, reads)
	}
	return reads
}

// txBack works the reads of keys no SET or DEL replaces back from one
// read taken after the transaction applied, command by command from the
// last.
type txBack struct {
	repl  map[string]bool
	est   []pending.Estimate // the read, of the keys in index
	index map[string]int
	err   error                       // the read's error
	later map[string]pending.Estimate // what increments after the read add
}

func (b *txBack) step(cmd *txCmd, items []change.Change, reads []txRead) {
	if cmd.effect == txIncr {
		k := cmd.keys[0]
		if b.repl[k] {
			return
		}
		l := b.later[k]
		// Within int64: AddAll accepted every pending delta.
		l.Total += items[0].Delta
		l.Var += items[0].Var
		b.later[k] = l
		return
	}
	for n, k := range cmd.keys {
		if cmd.reads() && !b.repl[k] {
			reads[n] = b.read(k)
		}
	}
}

// read is key k's value at the command being stepped.
func (b *txBack) read(k string) txRead {
	if b.err != nil {
		return txRead{err: fmt.Sprintf("ERR read totals: %v", b.err)}
	}
	e, l := b.est[b.index[k]], b.later[k]
	if e.Overflow != nil {
		return txRead{Estimate: e, err: fmt.Sprintf("ERR read totals: %v", e.Overflow)}
	}
	total, ok := subChecked(e.Total, l.Total)
	if !ok {
		return beyondInt64(k)
	}
	return txRead{Estimate: pending.Estimate{Total: total, Var: max(e.Var-l.Var, 0), Expires: e.Expires}}
}

// readForward works the reads of keys a SET or DEL replaces forward from
// pre, their values before the transaction.
func readForward(t *tx, items []change.Change, first []int, pre map[string]pending.Estimate, reads [][]txRead) {
	cur := make(map[string]txRead, len(pre))
	for k, e := range pre {
		cur[k] = txRead{Estimate: e}
		if e.Overflow != nil {
			cur[k] = txRead{Estimate: e, err: fmt.Sprintf("ERR read totals: %v", e.Overflow)}
		}
	}
	for i := range t.cmds {
		cmd := &t.cmds[i]
		switch cmd.effect {
		case txIncr:
			forwardIncr(cur, cmd.keys[0], items[first[i]])
		case txSet:
			if _, ok := cur[cmd.keys[0]]; ok {
				cur[cmd.keys[0]] = txRead{Estimate: pending.Estimate{Total: cmd.delta, Expires: cmd.at * 1000}}
			}
		}
		if !cmd.reads() {
			continue
		}
		for n, k := range cmd.keys {
			if r, ok := cur[k]; ok {
				reads[i][n] = r
				if cmd.effect == txDel {
					cur[k] = txRead{}
				}
			}
		}
	}
}

// forwardIncr adds an increment to key k's value, if k is worked forward.
func forwardIncr(cur map[string]txRead, k string, it change.Change) {
	r, ok := cur[k]
	if !ok || r.Overflow != nil {
		return // not worked forward, or beyond int64 before it: reported as that
	}
	if sum, ok := addInt(r.Total, it.Delta); ok {
		r.Total = sum
		r.Var += it.Var
	} else if r.err == "" {
		r = beyondInt64(k)
	}
	cur[k] = r
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
