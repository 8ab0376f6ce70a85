package server

import (
	"bytes"
	"context"
	"math"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/resp"
)

// MULTI/EXEC. Commands between MULTI and EXEC are validated when they
// arrive and queued, with copies of their keys (a transaction outlives the
// read buffer). EXEC accepts all the queued increments with one
// pending.Buffer.AddAll call, so they are one journal record, applied
// whole or not at all, then answers the reads as of their position in the
// transaction.

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

// txKind is what a queued command does at EXEC.
type txKind uint8

const (
	txIncr txKind = iota
	txGet
	txMGet
	txCount
	txHot
	txPing
	txPingMsg
	txUnwatch
	txSet // SET key n [EX...]: delta is n, at the expiry (unix second, 0: none)
	txDel // DEL key...
)

// txCmd is one queued command.
type txCmd struct {
	kind  txKind
	delta int64    // txIncr, txSet
	at    int64    // txSet
	keys  []string // txIncr (one), txGet, txMGet, txCount; txPingMsg: the message
}

// tx is an open transaction: what MULTI started and EXEC or DISCARD ends.
type tx struct {
	cmds  []txCmd
	keys  int  // keys queued, against maxTxKeys
	dirty bool // a command was refused: EXEC applies nothing
}

// transaction handles MULTI, EXEC, DISCARD, WATCH and UNWATCH, and every
// command while a transaction is open, and reports whether it did. QUIT
// or RESET inside a transaction discards it and is left to the caller, as
// is every command outside one.
func (c *session) transaction(ctx context.Context, args [][]byte) bool {
	name := args[0]
	if c.tx == nil {
		switch {
		case is(name, "MULTI"):
			if len(args) != 1 {
				c.refuse(wrongArityMsg(name))
				return true
			}
			c.tx = &tx{}
			c.out = resp.AppendOK(c.out)
		case is(name, "EXEC"):
			c.refuse(errExecNoMulti)
		case is(name, "DISCARD"):
			c.refuse(errDiscardNoMult)
		case is(name, "WATCH"):
			c.refuse(errWatch)
		case is(name, "UNWATCH"):
			c.out = resp.AppendOK(c.out) // nothing is ever watched
		default:
			return false
		}
		return true
	}
	switch {
	case is(name, "QUIT"):
		c.tx = nil // nothing of it is applied
		return false
	case is(name, "RESET"):
		// Run at once, as in Redis: it discards the transaction.
		if len(args) != 1 {
			c.tx.dirty = true
			c.refuse(wrongArityMsg(name))
			return true
		}
		c.tx = nil
		return false
	case is(name, "MULTI"):
		c.refuse(errMultiNested) // as Redis: the transaction stays usable
	case is(name, "WATCH"):
		c.refuse(errWatchInMulti)
	case is(name, "DISCARD"), is(name, "EXEC"):
		if len(args) != 1 {
			c.tx.dirty = true
			c.refuse(wrongArityMsg(name))
			return true
		}
		t := c.tx
		c.tx = nil
		if is(name, "DISCARD") {
			c.out = resp.AppendOK(c.out)
			return true
		}
		c.out = c.s.execTx(ctx, c.out, t)
	default:
		if msg := c.tx.queue(args, c.s.now()); msg != "" {
			c.tx.dirty = true
			c.refuse(msg)
			return true
		}
		c.out = resp.AppendSimple(c.out, "QUEUED")
	}
	return true
}

// refuse appends the error reply msg and counts it.
func (c *session) refuse(msg string) {
	c.s.m.commandErrors.Inc()
	c.out = resp.AppendError(c.out, msg)
}

// queue checks args as EXEC would run them and queues them, or returns
// why not. Everything that can be known before EXEC is checked here, so a
// mistake discards the whole transaction (EXECABORT) rather than failing
// one command of it: Redis itself would queue INCRBY k x and fail only
// that command at EXEC, applying the others.
func (t *tx) queue(args [][]byte, now time.Time) string {
	name := args[0]
	var cmd txCmd
	var keys [][]byte // checked as counter keys, and copied
	switch {
	case is(name, "INCR"), is(name, "DECR"):
		if len(args) != 2 {
			return wrongArityMsg(name)
		}
		cmd = txCmd{kind: txIncr, delta: 1}
		if is(name, "DECR") {
			cmd.delta = -1
		}
		keys = args[1:]
	case is(name, "INCRBY"), is(name, "DECRBY"):
		if len(args) != 3 {
			return wrongArityMsg(name)
		}
		d, ok := resp.ParseInt(args[2])
		if !ok {
			return errNotInt
		}
		if is(name, "DECRBY") {
			if d == math.MinInt64 { // it has no negation
				return "ERR decrement would overflow"
			}
			d = -d
		}
		cmd = txCmd{kind: txIncr, delta: d}
		keys = args[1:2]
	case is(name, "COUNT") && len(args) > 2, is(name, "RANGE"), is(name, "TOP"):
		return errWindowInMulti
	case is(name, "GET"), is(name, "COUNT"):
		if len(args) != 2 {
			return wrongArityMsg(name)
		}
		cmd.kind = txGet
		if is(name, "COUNT") {
			cmd.kind = txCount
		}
		keys = args[1:]
	case is(name, "MGET"):
		if len(args) < 2 {
			return wrongArityMsg(name)
		}
		cmd.kind = txMGet
		keys = args[1:]
	case is(name, "HOT"), is(name, "UNWATCH"):
		if len(args) != 1 {
			return wrongArityMsg(name)
		}
		cmd.kind = txHot
		if is(name, "UNWATCH") {
			cmd.kind = txUnwatch
		}
	case is(name, "PING"):
		switch len(args) {
		case 1:
			cmd.kind = txPing
		case 2:
			cmd.kind = txPingMsg
			cmd.keys = []string{string(args[1])}
		default:
			return wrongArityMsg(name)
		}
	case is(name, "DEL"):
		if len(args) < 2 {
			return wrongArityMsg(name)
		}
		cmd.kind = txDel
		keys = args[1:]
	case is(name, "SET"):
		if len(args) < 3 {
			return wrongArityMsg(name)
		}
		items, msg := parseSet(args, now)
		if msg != "" {
			return msg
		}
		cmd = txCmd{kind: txSet, delta: items[0].Delta}
		if len(items) > 1 {
			cmd.at = items[1].Delta
		}
		keys = args[1:2]
	case is(name, "EXPIRE"), is(name, "PEXPIRE"), is(name, "EXPIREAT"), is(name, "PEXPIREAT"),
		is(name, "TTL"), is(name, "PTTL"), is(name, "PERSIST"):
		return "ERR " + strings.ToUpper(string(name)) + " is not supported inside MULTI: send it outside the transaction"
	case is(name, "FLUSH"):
		return errFlushInMulti
	case isBudgetCommand(name):
		return errBudgetInMulti
	case is(name, "COMMAND"), is(name, "CONFIG"), is(name, "CLIENT"), is(name, "SELECT"),
		is(name, "HELLO"), is(name, "INFO"), is(name, "AUTH"),
		is(name, "ECHO"), is(name, "TIME"), is(name, "DBSIZE"):
		// Connection set-up and server facts, answered outside a
		// transaction only.
		return "ERR Command not allowed inside a transaction"
	default:
		return unknown(args)
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

func wrongArityMsg(name []byte) string {
	return "ERR wrong number of arguments for '" + string(bytes.ToLower(name)) + "' command"
}
