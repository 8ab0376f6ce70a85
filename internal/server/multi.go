package server

import (
	"context"
	"time"

	"github.com/counterd/counterd/internal/resp"
)

// MULTI/EXEC. Commands between MULTI and EXEC go through dispatch as any
// other (lookup, arity, policy: dispatch.go); those the table marks
// multiQueued are checked by their queue function when they arrive and
// queued, with copies of their keys (a transaction outlives the read
// buffer). EXEC accepts all the queued changes with one
// pending.Buffer.AddAll call, so they are one journal record, applied
// whole or not at all, then answers the reads as of their position in the
// transaction (multi_exec.go).

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
	errFlushInMulti = "ERR FLUSH is not allowed inside MULTI: it waits on the database; send it after EXEC"
	errTxTooLong    = "ERR transaction too long: more than 100000 keys queued"
	// A transaction's reads are answered at their position in it; time
	// window reads are not (yet), so they are refused rather than
	// answered as of EXEC.
	errWindowInMulti = "ERR COUNT ... SINCE, RANGE and TOP are not allowed inside MULTI; send them after EXEC"
)

// txEffect is what a queued command does to its keys at EXEC.
type txEffect uint8

const (
	txNoKeys txEffect = iota // PING, HOT, UNWATCH
	txIncr                   // adds delta to keys[0]
	txSet                    // sets keys[0] to delta, expiring at `at` (unix second; 0: never)
	txDel                    // zeroes its keys, reading them first for its reply
	txReads                  // reads its keys: GET, MGET, COUNT
)

// txCmd is one queued command.
type txCmd struct {
	effect txEffect
	delta  int64    // txIncr, txSet
	at     int64    // txSet
	keys   []string // the transaction's copies of the command's keys
	msg    string   // PING's message
	// reply appends the command's element of EXEC's array.
	reply func(s *Server, out []byte, r txResult) []byte
}

// reads reports whether the command reads its keys at its position (DEL
// does, for its reply).
func (c *txCmd) reads() bool { return c.effect == txReads || c.effect == txDel }

// replaces reports whether the command replaces its keys' totals.
func (c *txCmd) replaces() bool { return c.effect == txSet || c.effect == txDel }

// tx is an open transaction: what MULTI started and EXEC or DISCARD ends.
type tx struct {
	cmds  []txCmd
	keys  int  // keys queued, against maxTxKeys
	dirty bool // a command was refused: EXEC applies nothing
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

// unwatch answers UNWATCH: nothing is ever watched.
func (c *session) unwatch(context.Context, [][]byte) error {
	c.out = resp.AppendOK(c.out)
	return nil
}

// add checks a call of spec as EXEC would run it and queues it, or
// returns why not. Everything that can be known before EXEC is checked
// here, so a mistake discards the whole transaction (EXECABORT) rather
// than failing one command of it: Redis itself would queue INCRBY k x and
// fail only that command at EXEC, applying the others.
func (t *tx) add(spec *cmdSpec, args [][]byte, now time.Time) string {
	cmd, keys, msg := spec.queue(args, now)
	if msg != "" {
		return msg
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return err.Error()
		}
	}
	if t.keys += max(len(keys), 1); t.keys > maxTxKeys {
		return errTxTooLong
	}
	if t.dirty {
		return "" // it will never run: keep nothing
	}
	for _, k := range keys {
		cmd.keys = append(cmd.keys, string(k))
	}
	t.cmds = append(t.cmds, cmd)
	return ""
}

// Queue functions (cmdSpec.queue) of the commands a transaction may hold
// but the increments' (command.go).

// queueRead queues a read of the call's keys, answered by reply.
func queueRead(reply func(*Server, []byte, txResult) []byte) queuer {
	return func(args [][]byte, _ time.Time) (txCmd, [][]byte, string) {
		return txCmd{effect: txReads, reply: reply}, args[1:], ""
	}
}

// queueCount queues COUNT key; COUNT key SINCE span is refused.
func queueCount(args [][]byte, now time.Time) (txCmd, [][]byte, string) {
	if len(args) > 2 {
		return txCmd{}, nil, errWindowInMulti
	}
	return queueRead(replyCount)(args, now)
}

// queueNoKeys queues a command without keys, answered by reply.
func queueNoKeys(reply func(*Server, []byte, txResult) []byte) queuer {
	return func([][]byte, time.Time) (txCmd, [][]byte, string) {
		return txCmd{reply: reply}, nil, ""
	}
}

// queuePing queues PING [message].
func queuePing(args [][]byte, _ time.Time) (txCmd, [][]byte, string) {
	switch len(args) {
	case 1:
		return txCmd{reply: replyPong}, nil, ""
	case 2:
		return txCmd{msg: string(args[1]), reply: replyMsg}, nil, ""
	}
	return txCmd{}, nil, arityError("ping")
}

func queueDel(args [][]byte, _ time.Time) (txCmd, [][]byte, string) {
	return txCmd{effect: txDel, reply: replyDel}, args[1:], ""
}

func queueSet(args [][]byte, now time.Time) (txCmd, [][]byte, string) {
	items, msg := parseSet(args, now)
	if msg != "" {
		return txCmd{}, nil, msg
	}
	cmd := txCmd{effect: txSet, delta: items[0].Delta, reply: replyOK}
	if len(items) > 1 {
		cmd.at = items[1].Delta
	}
	return cmd, args[1:2], ""
}
