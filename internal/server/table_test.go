package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/pending"
)

// allSpecs is every command and subcommand of the table.
func allSpecs() []*cmdSpec {
	var specs []*cmdSpec
	for _, c := range commandTable {
		specs = append(specs, c)
		specs = append(specs, c.subs...)
	}
	return specs
}

// words makes a call to "name" or "parent|sub" with arity's fewest
// arguments, each "0".
func words(name string, arity int) []string {
	w := strings.Split(name, "|")
	n := max(arity, -arity)
	for len(w) < n {
		w = append(w, "0")
	}
	return w
}

// TestCommandTable walks the table: each entry is well formed, has a
// handler, reports the arity COMMAND INFO gives, and dispatch enforces
// that arity (a refusal counted as an error reply: PING's extra
// arguments were not counted before).
func TestCommandTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range commandTable {
		if len(c.name) > maxNameLen || strings.Contains(c.name, "|") {
			t.Errorf("%q: a command name is at most %d bytes, without |", c.name, maxNameLen)
		}
		for _, sub := range c.subs {
			if !strings.HasPrefix(sub.name, c.name+"|") {
				t.Errorf("%q: subcommand of %q must be named %s|...", sub.name, c.name, c.name)
			}
		}
	}
	for _, spec := range allSpecs() {
		if seen[spec.name] || spec.name != strings.ToLower(spec.name) {
			t.Errorf("%q: duplicate or not lower case", spec.name)
		}
		seen[spec.name] = true
		checkSpec(t, spec)
	}
}

// checkSpec checks one entry of the table.
func checkSpec(t *testing.T, spec *cmdSpec) {
	t.Helper()
	if spec.arity == 0 || spec.summary == "" || spec.since == "" || spec.group == "" || spec.complexity == "" {
		t.Errorf("%q: arity, summary, since, group and complexity are required", spec.name)
	}
	if (spec.firstKey == 0) != (len(spec.keyFlags) == 0) {
		t.Errorf("%q: key flags without keys or keys without key flags", spec.name)
	}
	// A container needing a subcommand (CLIENT, CONFIG) has no handler of
	// its own; its subcommands do.
	bare := len(spec.subs) == 0 || spec.arity > -2
	if bare != (spec.run != nil) {
		t.Errorf("%q: want a handler exactly when it can be called without a subcommand", spec.name)
	}
	c := newTestSession(t, "")
	name := strings.ReplaceAll(spec.name, "|", " ")
	want := fmt.Sprintf("*1\r\n*10\r\n$%d\r\n%s\r\n:%d\r\n", len(spec.name), spec.name, spec.arity)
	if got := do(t, c, "COMMAND", "INFO", spec.name); !strings.HasPrefix(got, want) {
		t.Errorf("COMMAND INFO %s: got %.60q; want it to start %q", name, got, want)
	}
	call := words(spec.name, spec.arity)
	if got := do(t, c, call...); bare && (strings.HasPrefix(got, "-ERR unknown") || strings.HasPrefix(got, "-ERR wrong number")) {
		t.Errorf("%q: got %q; want it answered", call, got)
	}
	checkArity(t, spec, call)
}

// checkArity checks that dispatch refuses spec called with one argument
// more than its exact arity or one fewer than its least, given call, a
// call with the fewest arguments it takes, and counts the error reply.
func checkArity(t *testing.T, spec *cmdSpec, call []string) {
	t.Helper()
	var bad [][]string
	if n := len(call); spec.arity > 0 {
		bad = append(bad, append(call[:n:n], "0"))
	}
	if min := len(strings.Split(spec.name, "|")); len(call) > min {
		bad = append(bad, call[:len(call)-1])
	}
	for _, call := range bad {
		c := newTestSession(t, "")
		errs := c.s.m.commandErrors.Get()
		if got, want := do(t, c, call...), "-"+arityError(spec.name)+"\r\n"; got != want {
			t.Errorf("%q: got %q; want %q", call, got, want)
		}
		if got := c.s.m.commandErrors.Get(); got != errs+1 {
			t.Errorf("%q: %d error replies counted; want 1", call, got-errs)
		}
	}
}

// TestCommandFlags checks counterd's own flags against each other and
// against Redis's, and pins which commands have each: a new command, or a
// changed flag, must be deliberate.
func TestCommandFlags(t *testing.T) {
	t.Parallel()
	pick := func(f func(c *cmdSpec) bool) string {
		var names []string
		for _, c := range commandTable {
			if f(c) {
				names = append(names, c.name)
			}
		}
		return strings.Join(names, " ")
	}
	for _, tc := range []struct {
		what string
		got  string
		want string
	}{
		{"fast path", pick(func(c *cmdSpec) bool { return c.fast != nil }), "incr decr incrby decrby incronce take pfadd sadd srem"},
		{"blocking", pick(func(c *cmdSpec) bool { return c.blocking }),
			"incronce get mget count range top flush exec budget take next del set expire pexpire expireat pexpireat ttl pttl persist pfadd pfcount pfmerge sadd srem sismember smismember scard smembers sscan"},
		{"queued in MULTI", pick(func(c *cmdSpec) bool { return c.multi == multiQueued }),
			"incr decr incrby decrby get mget count hot ping unwatch del set"},
		// Of those, only these wait (at EXEC, which waits for them).
		{"queued and blocking", pick(func(c *cmdSpec) bool { return c.multi == multiQueued && c.blocking }),
			"get mget count del set"},
		{"run at once in MULTI", pick(func(c *cmdSpec) bool { return c.multi == multiAtOnce }),
			"quit reset multi exec discard watch"},
		{"allowed before AUTH", pick((*cmdSpec).noAuth), "quit hello auth reset"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q; want %q", tc.what, tc.got, tc.want)
		}
	}
	for _, c := range allSpecs() {
		checkFlags(t, c)
	}
}

// checkFlags checks that c's flags agree with each other.
func checkFlags(t *testing.T, c *cmdSpec) {
	t.Helper()
	sub := strings.Contains(c.name, "|")
	for _, bad := range []struct {
		broken bool
		why    string
	}{
		{(c.multi == multiQueued) != (c.parse != nil), "a description (parser) exactly when queued inside MULTI"},
		{c.refusal != "" && c.multi != multiRefused, "a refusal only when refused inside MULTI"},
		{c.fast != nil && !c.has("write"), "a fast path only for a write"},
		{c.has("write") && !c.blocking && c.fast == nil, "a write waits (blocking) or joins the group (fast path)"},
		{c.noAuth() && c.blocking, "nothing allowed before AUTH blocks"},
		{c.has("write") && c.has("readonly"), "write or readonly, not both"},
		{len(c.subs) > 0 && c.multi != multiRefused, "a container is refused inside MULTI"},
		{sub && (c.multi != multiRefused || c.refusal != "" || c.fast != nil || c.blocking),
			"a subcommand runs only through its container, so has no MULTI policy, fast path or blocking of its own"},
	} {
		if bad.broken {
			t.Errorf("%q: want %s", c.name, bad.why)
		}
	}
}

// The fast path takes a well-formed call of exactly the commands the
// table gives one (TAKE's needs budgets: cmd/counterd tests it; PFADD's
// takes one member only), and nothing else.
func TestFastPath(t *testing.T) {
	t.Parallel()
	for _, spec := range commandTable {
		c := newTestSession(t, "")
		call := words(spec.name, spec.arity)
		args := make([][]byte, len(call))
		for i, w := range call {
			args[i] = []byte(strings.ToUpper(w))
		}
		want := spec.fast != nil && spec.name != "take"
		if spec.name == "pfadd" { // its fast path takes only PFADD key member
			want = false
			if !c.fastPath([][]byte{[]byte("PFADD"), []byte("k"), []byte("m")}) {
				t.Error("PFADD k m: fast path did not take it")
			}
		}
		if spec.name == "incronce" { // its fast path takes only a valid view (a window of 0 is not)
			want = false
			if !c.fastPath([][]byte{[]byte("INCRONCE"), []byte("k"), []byte("user:7"), []byte("8h")}) {
				t.Error("INCRONCE k user:7 8h: fast path did not take it")
			}
		}
		if got := c.fastPath(args); got != want {
			t.Errorf("%q: fast path took it: %v; want %v", call, got, want)
		}
	}
}

// multiRefusals are the errors of the commands refused inside MULTI,
// word for word (the README quotes them).
var multiRefusals = map[string]string{
	"incronce":   "ERR INCRONCE is not supported inside MULTI: send it outside the transaction",
	"range":      errWindowInMulti,
	"top":        errWindowInMulti,
	"flush":      "ERR FLUSH is not allowed inside MULTI: it waits on the database; send it after EXEC",
	"budget":     "ERR BUDGET, TAKE and NEXT are not allowed inside MULTI: send them outside a transaction",
	"take":       "ERR BUDGET, TAKE and NEXT are not allowed inside MULTI: send them outside a transaction",
	"next":       "ERR BUDGET, TAKE and NEXT are not allowed inside MULTI: send them outside a transaction",
	"expire":     "ERR EXPIRE is not supported inside MULTI: send it outside the transaction",
	"pexpire":    "ERR PEXPIRE is not supported inside MULTI: send it outside the transaction",
	"expireat":   "ERR EXPIREAT is not supported inside MULTI: send it outside the transaction",
	"pexpireat":  "ERR PEXPIREAT is not supported inside MULTI: send it outside the transaction",
	"ttl":        "ERR TTL is not supported inside MULTI: send it outside the transaction",
	"pttl":       "ERR PTTL is not supported inside MULTI: send it outside the transaction",
	"persist":    "ERR PERSIST is not supported inside MULTI: send it outside the transaction",
	"pfadd":      "ERR PFADD is not supported inside MULTI: send it outside the transaction",
	"pfcount":    "ERR PFCOUNT is not supported inside MULTI: send it outside the transaction",
	"pfmerge":    "ERR PFMERGE is not supported inside MULTI: send it outside the transaction",
	"sadd":       "ERR SADD is not supported inside MULTI: send it outside the transaction",
	"srem":       "ERR SREM is not supported inside MULTI: send it outside the transaction",
	"sismember":  "ERR SISMEMBER is not supported inside MULTI: send it outside the transaction",
	"smismember": "ERR SMISMEMBER is not supported inside MULTI: send it outside the transaction",
	"scard":      "ERR SCARD is not supported inside MULTI: send it outside the transaction",
	"smembers":   "ERR SMEMBERS is not supported inside MULTI: send it outside the transaction",
	"sscan":      "ERR SSCAN is not supported inside MULTI: send it outside the transaction",
	"echo":       "ERR Command not allowed inside a transaction",
	"hello":      "ERR Command not allowed inside a transaction",
	"auth":       "ERR Command not allowed inside a transaction",
	"select":     "ERR Command not allowed inside a transaction",
	"client":     "ERR Command not allowed inside a transaction",
	"command":    "ERR Command not allowed inside a transaction",
	"config":     "ERR Command not allowed inside a transaction",
	"info":       "ERR Command not allowed inside a transaction",
	"dbsize":     "ERR Command not allowed inside a transaction",
	"time":       "ERR Command not allowed inside a transaction",
}

// TestRefusals sends every command the table refuses inside MULTI within
// a transaction, and every command it refuses before AUTH on a connection
// that has not authenticated, on connections served by a goroutine and by
// an event loop: each gets the same refusal (and EXEC then EXECABORT),
// whichever serves it. The refusals inside MULTI come after the arity
// check, as in Redis: RANGE with too few arguments inside MULTI is a wrong
// number of arguments, and so is MULTI x, which discards the transaction.
func TestRefusals(t *testing.T) {
	t.Parallel()
	const (
		ok     = "+OK\r\n"
		abort  = "-EXECABORT Transaction discarded because of previous errors.\r\n"
		noAuth = "-NOAUTH Authentication required.\r\n"
	)
	var inMulti, wantMulti, beforeAuth, wantAuth strings.Builder
	for _, spec := range commandTable {
		call := strings.Join(words(spec.name, spec.arity), " ") + "\r\n"
		if spec.multi == multiRefused {
			msg, found := multiRefusals[spec.name]
			if !found {
				t.Errorf("%q is refused inside MULTI: add its refusal to multiRefusals", spec.name)
			}
			inMulti.WriteString("MULTI\r\n" + call + "INCR k\r\nEXEC\r\n")
			wantMulti.WriteString(ok + "-" + msg + "\r\n+QUEUED\r\n" + abort)
		}
		if !spec.noAuth() {
			beforeAuth.WriteString(call)
			wantAuth.WriteString(noAuth)
		}
	}
	inMulti.WriteString("MULTI\r\nRANGE k minute\r\nEXEC\r\nMULTI\r\nMULTI x\r\nEXEC\r\nGET k\r\n")
	wantMulti.WriteString(ok + "-" + arityError("range") + "\r\n" + abort + ok + "-" + arityError("multi") + "\r\n" + abort + "$1\r\n0\r\n")
	for _, io := range ioModes {
		t.Run(io, func(t *testing.T) {
			t.Parallel()
			c := dialLoop(t, unixServer(t, Options{IO: io}, nil))
			c.send(inMulti.String())
			c.expect(lines(wantMulti.String())...)
			p := dialLoop(t, unixServer(t, Options{IO: io, Password: "pw"}, nil))
			p.send(beforeAuth.String())
			p.expect(lines(wantAuth.String())...)
		})
	}
}

// lines splits replies into the lines a client reads.
func lines(s string) []string {
	l := strings.SplitAfter(s, "\r\n")
	return l[:len(l)-1]
}

// TestDispatchDoesNotAllocate: an increment through the fast path and a
// command through lookup, arity and its handler allocate nothing. Not
// parallel: AllocsPerRun counts every goroutine's allocations.
func TestDispatchDoesNotAllocate(t *testing.T) {
	s := New(pending.New(nil, pending.Options{}), Options{})
	sess := &session{s: s, out: make([]byte, 0, 4096)}
	ctx := context.Background()
	for _, call := range []string{"INCR post:42", "incrby post:42 10", "DECR post:42", "PING", "ping hi", "ECHO x", "DBSIZE"} {
		args := bytes.Fields([]byte(call))
		got := testing.AllocsPerRun(100, func() {
			_ = sess.exec(ctx, args)
			sess.endGroup(ctx)
			sess.out = sess.out[:0]
		})
		if got != 0 {
			t.Errorf("%s: %.1f allocations; want 0", call, got)
		}
	}
}
