package server

import (
	"bytes"
	"context"
	"time"

	"github.com/counterd/counterd/internal/resp"
)

// MULTI/EXEC. Between MULTI and EXEC dispatch (dispatch.go) queues each
// command the table describes (cmdSpec.parse): its parser checks it when
// it arrives, so a mistake discards the whole transaction (EXECABORT)
// rather than failing one command of it at EXEC, as Redis would for
// INCRBY k x. EXEC runs the queued calls (multi_exec.go).

// maxTxKeys bounds the keys one transaction may queue, so a client cannot
// grow a connection's memory without end; it also keeps EXEC's journal
// record (about 280 bytes per 256-byte key) under the journal's 64 MiB.
const maxTxKeys = 100_000

// Transaction replies, worded as Redis's.
const (
	errExecAbort     = "EXECABORT Transaction discarded because of previous errors."
	errMultiNested   = "ERR MULTI calls can not be nested"
	errExecNoMulti   = "ERR EXEC without MULTI"
	errDiscardNoMult = "ERR DISCARD without MULTI"
	errWatchInMulti  = "ERR WATCH inside MULTI is not allowed"
	errWatch         = "ERR WATCH is not supported: counterd cannot watch keys, whose counts change without notice; " +
		"use MULTI/EXEC alone, whose increments apply all or nothing"
	errTxTooLong = "ERR transaction too long: more than 100000 keys queued"
)

// tx is an open transaction: what MULTI started and EXEC or DISCARD ends.
type tx struct {
	calls []call
	keys  int  // keys queued, against maxTxKeys
	dirty bool // a command was refused: EXEC applies nothing
}

// add queues a call of spec, or returns why not.
func (t *tx) add(spec *cmdSpec, args [][]byte, now time.Time) string {
	cl, msg := spec.parse(args, now)
	if msg != "" {
		return msg
	}
	if t.keys += max(spec.keyCount(args), 1); t.keys > maxTxKeys {
		return errTxTooLong
	}
	if !t.dirty { // else it will never run: keep nothing
		cl.arg = bytes.Clone(cl.arg) // its keys are copies already
		t.calls = append(t.calls, cl)
	}
	return ""
}

// multiCmd answers MULTI. Nested, it is an error that leaves the
// transaction usable, as in Redis.
func (c *session) multiCmd(context.Context, [][]byte) error {
	if c.tx != nil {
		c.fail(errMultiNested)
		return nil
	}
	c.tx = &tx{}
	c.out = resp.AppendOK(c.out)
	return nil
}

// execCmd answers EXEC (multi_exec.go).
func (c *session) execCmd(ctx context.Context, _ [][]byte) error {
	t := c.tx
	if t == nil {
		c.fail(errExecNoMulti)
		return nil
	}
	c.tx = nil
	c.out = c.s.execTx(ctx, c.out, t)
	return nil
}

// discard answers DISCARD: nothing queued is applied.
func (c *session) discard(context.Context, [][]byte) error {
	if c.tx == nil {
		c.fail(errDiscardNoMult)
		return nil
	}
	c.tx = nil
	c.out = resp.AppendOK(c.out)
	return nil
}

// watch refuses WATCH: counts change without notice, so there is nothing
// to check-and-set against. Inside MULTI it leaves the transaction
// usable, as in Redis.
func (c *session) watch(context.Context, [][]byte) error {
	if c.tx != nil {
		c.fail(errWatchInMulti)
		return nil
	}
	c.fail(errWatch)
	return nil
}

// parseUnwatch describes UNWATCH: nothing is ever watched.
func parseUnwatch([][]byte, time.Time) (call, string) { return call{reply: replyOK}, "" }

func replyOK(_ *Server, out []byte, _ call, _ []read) []byte { return resp.AppendOK(out) }
