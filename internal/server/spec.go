package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/counterd/counterd/internal/change"
)

// cmdSpec is one command: how Redis's COMMAND INFO and COMMAND DOCS
// describe it, and how counterd runs it. commandTable (table.go) lists
// them all.
type cmdSpec struct {
	name string // lower case; "parent|sub" for a subcommand
	// arity counts the command name: n means exactly n arguments, -n at
	// least n. Dispatch checks it; handlers do not again.
	arity int
	// flags are Redis's command flags, as COMMAND reports them. Dispatch
	// reads no_auth (allowed before AUTH); write and readonly say whether
	// the command changes or reads counts.
	flags []string
	// Key positions, as Redis reports them: the first and last argument
	// that is a key (-1: the last argument) and the step between keys; 0
	// for a command without keys.
	firstKey, lastKey, step int
	keyFlags                []string // key-spec flags (RW, ACCESS...) of a command with keys
	acl                     []string // ACL categories
	tips                    []string // hints for cluster clients
	group, since            string
	summary, complexity     string
	subs                    []*cmdSpec

	// run answers the command (dispatch.go). For a container with
	// subcommands it answers the bare name (COMMAND); each subcommand has
	// its own.
	run handler
	// blocking: the command may wait on the journal's fsync, the database
	// or a lease, so an event loop runs it on a goroutine.
	blocking bool
	// multi is what the command does inside MULTI; refusal is its error
	// when refused there ("" is Redis's errNotInMulti).
	multi   multiPolicy
	refusal string
	// parse, when set, describes the command (call.go): run at once, or
	// queued inside MULTI (multiQueued) and run by EXEC. Its run is then
	// runCall, unless it sets its own.
	parse parser
	// fast, when set, takes a well-formed call into the connection's group
	// before any lookup: the increments' and TAKE's path, which must stay
	// free of allocations. It reports false to leave the call to run.
	fast fastHandler
	// groupReply, when set, is the reply of the changes of kind groupKind
	// its fast path joins to the group: the group's replies (group.go)
	// call it for each once the group is accepted. Without it a change's
	// reply is its Delta.
	groupKind  change.Kind
	groupReply groupReply
}

// handler answers one command, appending its reply to c.out. A non-nil
// error ends the connection once the replies are written (QUIT).
type handler func(c *session, ctx context.Context, args [][]byte) error

// onServer makes a handler of a Server method that appends its reply to
// out and needs nothing of the connection.
func onServer(f func(s *Server, ctx context.Context, out []byte, args [][]byte) []byte) handler {
	return func(c *session, ctx context.Context, args [][]byte) error {
		c.out = f(c.s, ctx, c.out, args)
		return nil
	}
}

// fastHandler adds a well-formed call to c's group and reports whether it
// did; spec is the command, recorded for CLIENT LIST.
type fastHandler func(c *session, spec *cmdSpec, args [][]byte) bool

// groupReply is the reply of change it, accepted with its group; a kind
// whose reply is not its Delta (PFADD's: whether the key's sketch
// changed; SADD's: what its round decided) declares one. A non-empty msg
// is an error reply instead. confirmed is false for a group accepted but
// not confirmed (its reply is then the group's error, and the returned
// values unused).
type groupReply func(s *Server, it change.Change, confirmed bool) (n int64, msg string)

// multiPolicy is what a command does between MULTI and EXEC, as Redis's
// CMD_NO_MULTI flag and its list of commands that run at once.
type multiPolicy uint8

const (
	// multiRefused (the zero value, so a new command is refused until it
	// says otherwise): an error that discards the transaction.
	multiRefused multiPolicy = iota
	// multiQueued: checked and queued, answered in EXEC's array.
	multiQueued
	// multiAtOnce: runs at once (MULTI, EXEC, DISCARD, WATCH, QUIT, RESET);
	// its handler knows it is inside a transaction.
	multiAtOnce
)

// errNotInMulti is Redis's refusal of a command flagged no-multi.
const errNotInMulti = "ERR Command not allowed inside a transaction"

// cmdIndex finds commands by name. It is built once from commandTable
// (commands), so handlers that list commands (COMMAND) do not refer to
// the table they are part of.
type cmdIndex struct {
	all    []*cmdSpec
	byName map[string]*cmdSpec
	fast   []*cmdSpec // the commands with a fast path, in table order
	// replies are the group replies by kind (cmdSpec.groupReply).
	replies [256]groupReply
}

// commands is the index of commandTable, built once as the package's
// variables are; nothing changes it after.
var commands = newCmdIndex(commandTable)

// newCmdIndex indexes table; it panics on a duplicate or overlong name.
func newCmdIndex(table []*cmdSpec) cmdIndex {
	x := cmdIndex{all: table, byName: make(map[string]*cmdSpec, len(table))}
	for _, c := range table {
		if len(c.name) > maxNameLen || x.byName[c.name] != nil {
			panic(fmt.Sprintf("BUG: command %q: duplicate or longer than %d bytes", c.name, maxNameLen))
		}
		x.byName[c.name] = c
		if c.fast != nil {
			x.fast = append(x.fast, c)
		}
		if c.parse != nil && c.run == nil {
			c.run = func(sess *session, ctx context.Context, args [][]byte) error { return sess.runCall(ctx, c, args) }
		}
		if c.groupReply != nil {
			x.replies[c.groupKind] = c.groupReply
		}
	}
	return x
}

// maxNameLen bounds a command's name, so lookup lowers it on the stack.
const maxNameLen = 16

// lookup returns the command named name (any case), or nil. It does not
// allocate.
func lookup(name []byte) *cmdSpec { return commands.lookup(name) }

// lookup returns x's command named name (any case), or nil. It does not
// allocate.
func (x *cmdIndex) lookup(name []byte) *cmdSpec {
	if len(name) > maxNameLen {
		return nil
	}
	var b [maxNameLen]byte
	for i, ch := range name {
		b[i] = lower(ch)
	}
	return x.byName[string(b[:len(name)])]
}

// sub returns c's subcommand named name (any case), or nil.
func (c *cmdSpec) sub(name []byte) *cmdSpec {
	for _, s := range c.subs {
		if is(name, s.name[len(c.name)+1:]) {
			return s
		}
	}
	return nil
}

// lookupFull finds a command or, for "parent|sub", a subcommand.
func (x *cmdIndex) lookupFull(name []byte) *cmdSpec {
	parent, sub, ok := strings.Cut(string(name), "|")
	c := x.lookup([]byte(parent))
	if !ok || c == nil {
		return c
	}
	return c.sub([]byte(sub))
}

// arityOK reports whether a command of n arguments (its name included)
// has an arity c accepts.
func (c *cmdSpec) arityOK(n int) bool {
	if c.arity >= 0 {
		return n == c.arity
	}
	return n >= -c.arity
}

// has reports whether c carries the Redis flag flag.
func (c *cmdSpec) has(flag string) bool {
	for _, f := range c.flags {
		if f == flag {
			return true
		}
	}
	return false
}

// noAuth reports whether c may run before the connection authenticates.
func (c *cmdSpec) noAuth() bool { return c.has("no_auth") }

// multiRefusal is c's error inside MULTI when it is refused there.
func (c *cmdSpec) multiRefusal() string {
	if c.refusal != "" {
		return c.refusal
	}
	return errNotInMulti
}

// is reports whether name is cmd, ignoring ASCII case (command names and
// options are ASCII: a name with other bytes matches none).
func is(name []byte, cmd string) bool {
	if len(name) != len(cmd) {
		return false
	}
	for i := range len(name) {
		if lower(name[i]) != lower(cmd[i]) {
			return false
		}
	}
	return true
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}
