package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/counterd/counterd/internal/resp"
)

// Dispatch. Every command a connection sends goes through exec, whether a
// goroutine serves the connection (session.go) or an event loop does
// (loop_pass_linux.go), and inside MULTI too:
//
//  1. fast path: a well-formed increment or TAKE with a lease in hand
//     joins the connection's group before any lookup (cmdSpec.fast);
//  2. lookup: an unknown name is refused;
//  3. arity, from the table;
//  4. authentication: before AUTH only no_auth commands run;
//  5. policy: inside MULTI a command is queued (checked as EXEC will run
//     it, within maxTxKeys), refused by its table entry, or run at once;
//  6. the handler (for a container, its subcommand's, after the same
//     name and arity checks).
//
// A refusal at steps 2–5 inside MULTI discards the transaction, as in
// Redis. Nothing after the table re-checks what it says.

// exec runs one command: an increment joins the session's group; any
// other command first ends the group, then appends its reply. A non-nil
// error ends the connection after the replies are written.
func (c *session) exec(ctx context.Context, args [][]byte) error {
	c.s.m.commands.Inc()
	if c.fastPath(args) {
		return nil
	}
	c.endGroup(ctx)
	return c.dispatch(ctx, args)
}

// fastPath runs step 1 and reports whether the call joined the group.
func (c *session) fastPath(args [][]byte) bool {
	if c.conn.needAuth || c.tx != nil {
		return false
	}
	for _, spec := range commands.fast {
		if is(args[0], spec.name) {
			return spec.fast(c, spec, args)
		}
	}
	return false
}

// dispatch runs steps 2 to 6.
func (c *session) dispatch(ctx context.Context, args [][]byte) error {
	spec, msg := c.check(args)
	if msg != "" {
		c.reject(msg)
		return nil
	}
	if c.tx != nil && spec.multi != multiAtOnce {
		c.queue(spec, args)
		return nil
	}
	if len(spec.subs) > 0 && len(args) > 1 {
		if spec, msg = c.subcommand(spec, args[1], len(args)); msg != "" {
			c.reject(msg)
			return nil
		}
	}
	return spec.run(c, ctx, args)
}

// check runs lookup, arity and authentication (steps 2 to 4) and returns
// the command, or the error reply.
func (c *session) check(args [][]byte) (*cmdSpec, string) {
	spec := lookup(args[0])
	if spec == nil {
		return nil, unknown(args)
	}
	c.conn.lastCmd.Store(spec)
	switch {
	case !spec.arityOK(len(args)):
		return nil, arityError(spec.name)
	case c.conn.needAuth && !spec.noAuth():
		return nil, "NOAUTH Authentication required."
	}
	return spec, ""
}

// subcommand finds container's subcommand name and checks its arity,
// which counts the container's name: n is the call's argument count.
func (c *session) subcommand(container *cmdSpec, name []byte, n int) (*cmdSpec, string) {
	sub := container.sub(name)
	if sub == nil {
		return nil, unknownSub(container, name)
	}
	if !sub.arityOK(n) {
		return nil, arityError(sub.name)
	}
	c.conn.lastCmd.Store(sub)
	return sub, ""
}

// queue is step 5 inside MULTI: the command is checked and queued
// (+QUEUED), or refused, which discards the transaction.
func (c *session) queue(spec *cmdSpec, args [][]byte) {
	if spec.multi != multiQueued {
		c.reject(spec.multiRefusal())
		return
	}
	if msg := c.tx.add(spec, args, c.s.now()); msg != "" {
		c.reject(msg)
		return
	}
	c.out = resp.AppendSimple(c.out, "QUEUED")
}

// reject refuses a command before its handler: an error reply that, inside
// MULTI, discards the transaction (EXEC then replies EXECABORT).
func (c *session) reject(msg string) {
	if c.tx != nil {
		c.tx.dirty = true
	}
	c.fail(msg)
}

// fail appends an error reply and counts it.
func (c *session) fail(msg string) {
	c.s.m.commandErrors.Inc()
	c.out = resp.AppendError(c.out, msg)
}

// blocks reports whether dispatching args may wait on the journal's
// fsync, the database or a lease, so an event loop runs it on a goroutine.
// Refusals, queueing inside MULTI and the commands the table does not
// mark blocking run on the loop.
func (c *session) blocks(args [][]byte) bool {
	if c.conn.needAuth {
		return false // refused, or a no_auth command: none blocks
	}
	spec := lookup(args[0])
	if spec == nil || !spec.blocking {
		return false
	}
	return c.tx == nil || spec.multi == multiAtOnce
}

func arityError(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// unknown words the error as Redis does, quoting at most a few arguments.
func unknown(args [][]byte) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "ERR unknown command '%s', with args beginning with:", clip(args[0]))
	for i, a := range args[1:] {
		if i == 3 {
			break
		}
		fmt.Fprintf(&b, " '%s'", clip(a))
	}
	return b.String()
}

// unknownSub names the subcommands counterd has, since it has no HELP.
func unknownSub(spec *cmdSpec, sub []byte) string {
	names := make([]string, len(spec.subs))
	for i, s := range spec.subs {
		_, n, _ := strings.Cut(s.name, "|")
		names[i] = strings.ToUpper(n)
	}
	return fmt.Sprintf("ERR unknown subcommand '%s'. counterd's %s has %s",
		clip(sub), strings.ToUpper(spec.name), strings.Join(names, ", "))
}

func clip(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}
