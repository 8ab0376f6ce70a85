package server

import "strings"

// cmdSpec describes one command as Redis's COMMAND INFO and COMMAND DOCS
// report it. The table below is the one list of commands: dispatch looks
// names up in it (unknown names and wrong arity are answered from it), and
// COMMAND, COMMAND COUNT, COMMAND INFO and COMMAND DOCS are generated from
// it, so they cannot disagree.
type cmdSpec struct {
	name string // lower case; "parent|sub" for a subcommand
	// arity counts the command name: n means exactly n arguments, -n at
	// least n.
	arity int
	flags []string // Redis command flags: write, readonly, fast, no_auth...
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
}

// The increments have their own variables: the INCR path records them as
// the connection's last command without a lookup.
var (
	cmdIncr   = keyed("incr", 2, "Adds 1 to a counter; replies 1, the amount added.", "string", "1.0.0", writeKey)
	cmdDecr   = keyed("decr", 2, "Subtracts 1 from a counter; replies -1, the amount added.", "string", "1.0.0", writeKey)
	cmdIncrBy = keyed("incrby", 3, "Adds n to a counter; replies n, the amount added.", "string", "1.0.0", writeKey)
	cmdDecrBy = keyed("decrby", 3, "Subtracts n from a counter; replies -n, the amount added.", "string", "1.0.0", writeKey)
)

var writeKey = []string{"RW", "ACCESS", "UPDATE"}

// connFlags are the flags Redis gives its connection commands.
var connFlags = []string{"noscript", "loading", "stale", "fast", "no_auth", "sentinel", "allow_busy"}

// commandTable is every command counterd answers, in the order COMMAND
// lists them. The transaction commands are answered in multi.go.
var commandTable = []*cmdSpec{
	cmdIncr, cmdDecr, cmdIncrBy, cmdDecrBy,
	{name: "get", arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO", "ACCESS"}, acl: []string{"@read", "@string", "@fast"},
		group: "string", since: "1.0.0", complexity: "O(1)",
		summary: "Returns a counter's exact total as a bulk string; 0 for a key never counted."},
	{name: "mget", arity: -2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: -1, step: 1,
		keyFlags: []string{"RO", "ACCESS"}, acl: []string{"@read", "@string", "@fast"},
		tips: []string{"request_policy:multi_shard"}, group: "string", since: "1.0.0",
		complexity: "O(N) where N is the number of keys", summary: "Returns the totals of several counters."},
	{name: "count", arity: -2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO", "ACCESS"}, acl: []string{"@read", "@slow"},
		group: "counterd", since: "1.0.0", complexity: "O(1); with SINCE, O(N) where N is the number of buckets",
		summary: "Returns a counter's total (or, with SINCE span, its count over its time buckets covering the span), whether it is exact or estimated, and its 95% error bound."},
	{name: "range", arity: 4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO", "ACCESS"}, acl: []string{"@read", "@slow"},
		group: "counterd", since: "1.0.0", complexity: "O(N) where N is the number of buckets",
		summary: "Returns a counter's last N buckets of a width (minute, hour, day) as [bucket_start_unix, total] pairs, oldest first."},
	{name: "top", arity: 5, flags: []string{"readonly"}, acl: []string{"@read", "@slow"},
		tips: []string{"nondeterministic_output"}, group: "counterd", since: "1.0.0",
		complexity: "O(N) where N is the number of buckets of the width in the span",
		summary:    "Returns the keys matching a prefix pattern with the largest counts over the last N buckets of a width, as [key, total] pairs."},
	{name: "hot", arity: 1, flags: []string{"readonly"}, acl: []string{"@read", "@slow"},
		tips: []string{"nondeterministic_output"}, group: "counterd", since: "1.0.0",
		complexity: "O(N) where N is the number of hot keys",
		summary:    "Returns the keys hot now with their rate per second and sampling factor N, hottest first."},
	{name: "flush", arity: 1, flags: []string{"write", "noscript"}, acl: []string{"@write", "@slow"},
		group: "counterd", since: "1.0.0", complexity: "O(N) where N is the number of pending keys",
		summary: "Replies OK once every increment accepted before it is committed in PostgreSQL."},
	{name: "ping", arity: -1, flags: []string{"fast", "sentinel"}, acl: []string{"@fast", "@connection"},
		group: "connection", since: "1.0.0", complexity: "O(1)", summary: "Returns the server's liveliness response."},
	{name: "echo", arity: 2, flags: []string{"loading", "stale", "fast"}, acl: []string{"@fast", "@connection"},
		group: "connection", since: "1.0.0", complexity: "O(1)", summary: "Returns the given string."},
	{name: "quit", arity: -1, flags: []string{"allow_busy", "noscript", "loading", "stale", "fast", "no_auth"},
		acl: []string{"@fast", "@connection"}, group: "connection", since: "1.0.0", complexity: "O(1)",
		summary: "Closes the connection."},
	{name: "hello", arity: -1, flags: connFlags, acl: []string{"@fast", "@connection"},
		group: "connection", since: "6.0.0", complexity: "O(1)",
		summary: "Handshakes with the server: picks RESP2 or RESP3, authenticates, names the connection."},
	{name: "auth", arity: -2, flags: connFlags, acl: []string{"@fast", "@connection"},
		group: "connection", since: "1.0.0", complexity: "O(N) where N is the number of passwords defined for the user",
		summary: "Authenticates the connection (COUNTERD_PASSWORD, user default)."},
	{name: "reset", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"},
		acl: []string{"@fast", "@connection"}, group: "connection", since: "6.2.0", complexity: "O(1)",
		summary: "Resets the connection: discards a transaction, returns to RESP2, forgets the name and, with COUNTERD_PASSWORD, the authentication."},
	{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, acl: []string{"@keyspace", "@fast"},
		group: "connection", since: "1.0.0", complexity: "O(1)", summary: "Selects database 0, the only one counterd has."},
	{name: "client", arity: -2, flags: []string{"sentinel"}, acl: []string{"@slow"},
		group: "connection", since: "2.4.0", complexity: "Depends on subcommand.",
		summary: "A container for client connection commands.", subs: []*cmdSpec{
			clientSub("id", 2, "Returns the unique client ID of the connection.", "5.0.0", nil),
			clientSub("getname", 2, "Returns the name of the connection.", "2.6.9", nil),
			clientSub("setname", 3, "Sets the connection name.", "2.6.9", nil),
			clientSub("setinfo", 4, "Sets information specific to the client or connection.", "7.2.0", nil),
			clientSub("info", 2, "Returns information about the connection.", "6.2.0", []string{"nondeterministic_output"}),
			clientSub("list", -2, "Lists open connections.", "2.4.0", []string{"nondeterministic_output"}),
			clientSub("tracking", -3, "Refused: counterd does not support client-side caching.", "6.0.0", nil),
		}},
	{name: "command", arity: -1, flags: []string{"loading", "stale", "sentinel"}, acl: []string{"@slow", "@connection"},
		tips: []string{"nondeterministic_output_order"}, group: "server", since: "2.8.13",
		complexity: "O(N) where N is the total number of commands", summary: "Returns detailed information about all commands.",
		subs: []*cmdSpec{
			serverSub("command|count", 2, "Returns a count of commands.", "2.8.13"),
			serverSub("command|docs", -2, "Returns documentary information about one, multiple or all commands.", "7.0.0"),
			serverSub("command|info", -2, "Returns information about one, multiple or all commands.", "2.8.13"),
			serverSub("command|list", -2, "Returns a list of command names.", "7.0.0"),
		}},
	{name: "config", arity: -2, acl: []string{"@slow"}, group: "server", since: "2.0.0",
		complexity: "Depends on subcommand.", summary: "A container for server configuration commands.",
		subs: []*cmdSpec{{name: "config|get", arity: -3, flags: []string{"admin", "noscript", "loading", "stale"},
			acl: []string{"@admin", "@slow", "@dangerous"}, group: "server", since: "2.0.0",
			complexity: "O(N) when N is the number of parameters",
			summary:    "Returns an empty value for each parameter named (counterd has no Redis configuration)."}}},
	{name: "info", arity: -1, flags: []string{"loading", "stale", "sentinel"}, acl: []string{"@slow", "@dangerous"},
		tips: []string{"nondeterministic_output"}, group: "server", since: "1.0.0", complexity: "O(1)",
		summary: "Returns information and statistics about the server."},
	{name: "dbsize", arity: 1, flags: []string{"readonly", "fast"}, acl: []string{"@keyspace", "@read", "@fast"},
		group: "server", since: "1.0.0", complexity: "O(1)",
		summary: "Returns the number of keys accepted and not yet flushed."},
	{name: "time", arity: 1, flags: []string{"loading", "stale", "fast"}, acl: []string{"@fast"},
		tips: []string{"nondeterministic_output"}, group: "server", since: "2.6.0", complexity: "O(1)",
		summary: "Returns the server time."},
	txn("multi", 1, "Starts a transaction.", "@fast"),
	txn("exec", 1, "Executes all commands in a transaction.", "@slow"),
	txn("discard", 1, "Discards a transaction.", "@fast"),
	{name: "watch", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"},
		firstKey: 1, lastKey: -1, step: 1, keyFlags: []string{"RO"}, acl: []string{"@fast", "@transaction"},
		group: "transactions", since: "2.2.0", complexity: "O(1) for every key.",
		summary: "Monitors changes to keys to determine the execution of a transaction."},
	txn("unwatch", 1, "Forgets about watched keys of a transaction.", "@fast"),
}

func keyed(name string, arity int, summary, group, since string, keyFlags []string) *cmdSpec {
	return &cmdSpec{name: name, arity: arity, flags: []string{"write", "denyoom", "fast"},
		firstKey: 1, lastKey: 1, step: 1, keyFlags: keyFlags, acl: []string{"@write", "@string", "@fast"},
		group: group, since: since, complexity: "O(1)", summary: summary}
}

func clientSub(name string, arity int, summary, since string, tips []string) *cmdSpec {
	return &cmdSpec{name: "client|" + name, arity: arity, flags: []string{"noscript", "loading", "stale", "sentinel"},
		acl: []string{"@slow", "@connection"}, tips: tips, group: "connection", since: since,
		complexity: "O(1)", summary: summary}
}

func serverSub(name string, arity int, summary, since string) *cmdSpec {
	return &cmdSpec{name: name, arity: arity, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"},
		group: "server", since: since, complexity: "O(N) where N is the number of commands", summary: summary}
}

func txn(name string, arity int, summary, speed string) *cmdSpec {
	flags := []string{"noscript", "loading", "stale", "allow_busy"}
	if speed == "@fast" {
		flags = append(flags, "fast")
	}
	return &cmdSpec{name: name, arity: arity, flags: flags, acl: []string{speed, "@transaction"},
		group: "transactions", since: "2.0.0", complexity: "O(1)", summary: summary}
}

// lookup returns the command named name (any case), or nil.
func lookup(name []byte) *cmdSpec { return find(commandTable, name, "") }

// sub returns c's subcommand named name (any case), or nil.
func (c *cmdSpec) sub(name []byte) *cmdSpec { return find(c.subs, name, c.name+"|") }

func find(specs []*cmdSpec, name []byte, prefix string) *cmdSpec {
	for _, c := range specs {
		if is(name, c.name[len(prefix):]) {
			return c
		}
	}
	return nil
}

// lookupFull finds a command or, for "parent|sub", a subcommand.
func lookupFull(name []byte) *cmdSpec {
	parent, sub, ok := strings.Cut(string(name), "|")
	c := lookup([]byte(parent))
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

// has reports whether c carries flag.
func (c *cmdSpec) has(flag string) bool {
	for _, f := range c.flags {
		if f == flag {
			return true
		}
	}
	return false
}
