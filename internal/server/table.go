package server

import "slices"

// commandTable is every command counterd answers, in the order COMMAND
// lists them, each declared once: its Redis description (name, arity,
// flags, keys, docs), its handler and counterd's own flags (blocking,
// what it does inside MULTI, its fast path). Dispatch (dispatch.go) reads
// nothing else: lookup, arity, authentication and policy come from here,
// for a connection served by a goroutine, by an event loop and inside
// MULTI alike, and COMMAND, COMMAND COUNT, COMMAND INFO and COMMAND DOCS
// are generated from it, so they cannot disagree.
//
// Adding a command is one entry here and one handler; a kind's commands
// are entries of its own file (kind_<kind>.go), listed here in order. Its zero
// values are the safe ones: refused inside MULTI, not blocking, no fast
// path, not allowed before AUTH unless its Redis flags say no_auth. To
// queue it inside MULTI, describe it with a parser (call.go) instead of a
// handler, and say multiQueued; TestCommandTable checks the entry is
// consistent.
var commandTable = slices.Concat([]*cmdSpec{
	counter("incr", 2, fixedDelta(1), "Adds 1 to a counter; replies 1, the amount added."),
	counter("decr", 2, fixedDelta(-1), "Subtracts 1 from a counter; replies -1, the amount added."),
	counter("incrby", 3, argDelta(1), "Adds n to a counter; replies n, the amount added."),
	counter("decrby", 3, argDelta(-1), "Subtracts n from a counter; replies -n, the amount added."),
	onceCommand, // kind_once.go
	{name: "get", arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO", "ACCESS"}, acl: []string{"@read", "@string", "@fast"},
		group: "string", since: "1.0.0", complexity: "O(1)",
		summary: "Returns a counter's exact total as a bulk string; 0 for a key never counted.",
		parse:   parseGet, blocking: true, multi: multiQueued},
	{name: "mget", arity: -2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: -1, step: 1,
		keyFlags: []string{"RO", "ACCESS"}, acl: []string{"@read", "@string", "@fast"},
		tips: []string{"request_policy:multi_shard"}, group: "string", since: "1.0.0",
		complexity: "O(N) where N is the number of keys", summary: "Returns the totals of several counters.",
		parse: parseMGet, blocking: true, multi: multiQueued},
	{name: "count", arity: -2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO", "ACCESS"}, acl: []string{"@read", "@slow"},
		group: "counterd", since: "1.0.0", complexity: "O(1); with SINCE, O(N) where N is the number of buckets",
		summary: "Returns a counter's total (or, with SINCE span, its count over its time buckets covering the span), whether it is exact or estimated, and its 95% error bound.",
		parse:   parseCount, blocking: true, multi: multiQueued},
	{name: "range", arity: 4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RO", "ACCESS"}, acl: []string{"@read", "@slow"},
		group: "counterd", since: "1.0.0", complexity: "O(N) where N is the number of buckets",
		summary: "Returns a counter's last N buckets of a width (minute, hour, day) as [bucket_start_unix, total] pairs, oldest first.",
		run:     onServer((*Server).rangeCmd), blocking: true, refusal: errWindowInMulti},
	{name: "top", arity: 5, flags: []string{"readonly"}, acl: []string{"@read", "@slow"},
		tips: []string{"nondeterministic_output"}, group: "counterd", since: "1.0.0",
		complexity: "O(N) where N is the number of buckets of the width in the span",
		summary:    "Returns the keys matching a prefix pattern with the largest counts over the last N buckets of a width, as [key, total] pairs.",
		run:        onServer((*Server).top), blocking: true, refusal: errWindowInMulti},
	{name: "hot", arity: 1, flags: []string{"readonly"}, acl: []string{"@read", "@slow"},
		tips: []string{"nondeterministic_output"}, group: "counterd", since: "1.0.0",
		complexity: "O(N) where N is the number of hot keys",
		summary:    "Returns the keys hot now with their rate per second and sampling factor N, hottest first.",
		parse:      parseHot, multi: multiQueued},
	{name: "flush", arity: 1, flags: []string{"write", "noscript"}, acl: []string{"@write", "@slow"},
		group: "counterd", since: "1.0.0", complexity: "O(N) where N is the number of pending keys",
		summary: "Replies OK once every increment accepted before it is committed in PostgreSQL.",
		run:     (*session).flush, blocking: true, refusal: errFlushInMulti},
	{name: "ping", arity: -1, flags: []string{"fast", "sentinel"}, acl: []string{"@fast", "@connection"},
		group: "connection", since: "1.0.0", complexity: "O(1)", summary: "Returns the server's liveliness response.",
		parse: parsePing, multi: multiQueued},
	{name: "echo", arity: 2, flags: []string{"loading", "stale", "fast"}, acl: []string{"@fast", "@connection"},
		group: "connection", since: "1.0.0", complexity: "O(1)", summary: "Returns the given string.",
		run: (*session).echo},
	{name: "quit", arity: -1, flags: []string{"allow_busy", "noscript", "loading", "stale", "fast", "no_auth"},
		acl: []string{"@fast", "@connection"}, group: "connection", since: "1.0.0", complexity: "O(1)",
		summary: "Closes the connection.",
		run:     (*session).quit, multi: multiAtOnce},
	{name: "hello", arity: -1, flags: connFlags, acl: []string{"@fast", "@connection"},
		group: "connection", since: "6.0.0", complexity: "O(1)",
		summary: "Handshakes with the server: picks RESP2 or RESP3, authenticates, names the connection.",
		run:     (*session).hello},
	{name: "auth", arity: -2, flags: connFlags, acl: []string{"@fast", "@connection"},
		group: "connection", since: "1.0.0", complexity: "O(N) where N is the number of passwords defined for the user",
		summary: "Authenticates the connection (COUNTERD_PASSWORD, user default).",
		run:     (*session).auth},
	{name: "reset", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"},
		acl: []string{"@fast", "@connection"}, group: "connection", since: "6.2.0", complexity: "O(1)",
		summary: "Resets the connection: discards a transaction, returns to RESP2, forgets the name and, with COUNTERD_PASSWORD, the authentication.",
		run:     (*session).reset, multi: multiAtOnce},
	{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, acl: []string{"@keyspace", "@fast"},
		group: "connection", since: "1.0.0", complexity: "O(1)", summary: "Selects database 0, the only one counterd has.",
		run: (*session).selectDB},
	{name: "client", arity: -2, flags: []string{"sentinel"}, acl: []string{"@slow"},
		group: "connection", since: "2.4.0", complexity: "Depends on subcommand.",
		summary: "A container for client connection commands.", subs: []*cmdSpec{
			clientSub("id", 2, "Returns the unique client ID of the connection.", "5.0.0", nil, (*session).clientID),
			clientSub("getname", 2, "Returns the name of the connection.", "2.6.9", nil, (*session).clientGetName),
			clientSub("setname", 3, "Sets the connection name.", "2.6.9", nil, (*session).clientSetName),
			clientSub("setinfo", 4, "Sets information specific to the client or connection.", "7.2.0", nil, (*session).clientSetInfo),
			clientSub("info", 2, "Returns information about the connection.", "6.2.0", []string{"nondeterministic_output"}, (*session).clientInfo),
			clientSub("list", -2, "Lists open connections.", "2.4.0", []string{"nondeterministic_output"}, (*session).clientList),
			clientSub("tracking", -3, "Refused: counterd does not support client-side caching.", "6.0.0", nil, (*session).clientTracking),
		}},
	{name: "command", arity: -1, flags: []string{"loading", "stale", "sentinel"}, acl: []string{"@slow", "@connection"},
		tips: []string{"nondeterministic_output_order"}, group: "server", since: "2.8.13",
		complexity: "O(N) where N is the total number of commands", summary: "Returns detailed information about all commands.",
		run: (*session).command, subs: []*cmdSpec{
			serverSub("command|count", 2, "Returns a count of commands.", "2.8.13", (*session).commandCount),
			serverSub("command|docs", -2, "Returns documentary information about one, multiple or all commands.", "7.0.0", (*session).commandDocs),
			serverSub("command|info", -2, "Returns information about one, multiple or all commands.", "2.8.13", (*session).commandInfo),
			serverSub("command|list", -2, "Returns a list of command names.", "7.0.0", (*session).commandList),
		}},
	{name: "config", arity: -2, acl: []string{"@slow"}, group: "server", since: "2.0.0",
		complexity: "Depends on subcommand.", summary: "A container for server configuration commands.",
		subs: []*cmdSpec{{name: "config|get", arity: -3, flags: []string{"admin", "noscript", "loading", "stale"},
			acl: []string{"@admin", "@slow", "@dangerous"}, group: "server", since: "2.0.0",
			complexity: "O(N) when N is the number of parameters",
			summary:    "Returns an empty value for each parameter named (counterd has no Redis configuration).",
			run:        (*session).configGet}}},
	{name: "info", arity: -1, flags: []string{"loading", "stale", "sentinel"}, acl: []string{"@slow", "@dangerous"},
		tips: []string{"nondeterministic_output"}, group: "server", since: "1.0.0", complexity: "O(1)",
		summary: "Returns information and statistics about the server.",
		run:     (*session).infoCmd},
	{name: "dbsize", arity: 1, flags: []string{"readonly", "fast"}, acl: []string{"@keyspace", "@read", "@fast"},
		group: "server", since: "1.0.0", complexity: "O(1)",
		summary: "Returns the number of keys accepted and not yet flushed.",
		run:     (*session).dbsize},
	{name: "time", arity: 1, flags: []string{"loading", "stale", "fast"}, acl: []string{"@fast"},
		tips: []string{"nondeterministic_output"}, group: "server", since: "2.6.0", complexity: "O(1)",
		summary: "Returns the server time.",
		run:     (*session).time},
	txn("multi", "Starts a transaction.", "@fast", cmdSpec{run: (*session).multiCmd, multi: multiAtOnce}),
	txn("exec", "Executes all commands in a transaction.", "@slow",
		cmdSpec{run: (*session).execCmd, multi: multiAtOnce, blocking: true}),
	txn("discard", "Discards a transaction.", "@fast", cmdSpec{run: (*session).discard, multi: multiAtOnce}),
	{name: "watch", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"},
		firstKey: 1, lastKey: -1, step: 1, keyFlags: []string{"RO"}, acl: []string{"@fast", "@transaction"},
		group: "transactions", since: "2.2.0", complexity: "O(1) for every key.",
		summary: "Monitors changes to keys to determine the execution of a transaction.",
		run:     (*session).watch, multi: multiAtOnce},
	txn("unwatch", "Forgets about watched keys of a transaction.", "@fast",
		cmdSpec{parse: parseUnwatch, multi: multiQueued}),
},
	budgetCommands,    // kind_budget.go
	setCommands,       // kind_set.go
	expireCommands,    // kind_expire.go
	uniqueCommands,    // kind_unique.go
	setMemberCommands, // kind_member.go
)

var writeKey = []string{"RW", "ACCESS", "UPDATE"}

// connFlags are the flags Redis gives its connection commands.
var connFlags = []string{"noscript", "loading", "stale", "fast", "no_auth", "sentinel", "allow_busy"}

// counter is an increment command: its fast path groups a well-formed
// call; its description (deltaFunc.parse) answers one the fast path
// refused, and is queued inside MULTI.
func counter(name string, arity int, d deltaFunc, summary string) *cmdSpec {
	return &cmdSpec{name: name, arity: arity, flags: []string{"write", "denyoom", "fast"},
		firstKey: 1, lastKey: 1, step: 1, keyFlags: writeKey, acl: []string{"@write", "@string", "@fast"},
		group: "string", since: "1.0.0", complexity: "O(1)", summary: summary,
		parse: d.parse, fast: d.fast, multi: multiQueued}
}

func clientSub(name string, arity int, summary, since string, tips []string, run handler) *cmdSpec {
	return &cmdSpec{name: "client|" + name, arity: arity, flags: []string{"noscript", "loading", "stale", "sentinel"},
		acl: []string{"@slow", "@connection"}, tips: tips, group: "connection", since: since,
		complexity: "O(1)", summary: summary, run: run}
}

func serverSub(name string, arity int, summary, since string, run handler) *cmdSpec {
	return &cmdSpec{name: name, arity: arity, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"},
		group: "server", since: since, complexity: "O(N) where N is the number of commands", summary: summary, run: run}
}

// txn is a transaction command without arguments, run as d says.
func txn(name, summary, speed string, d cmdSpec) *cmdSpec {
	flags := []string{"noscript", "loading", "stale", "allow_busy"}
	if speed == "@fast" {
		flags = append(flags, "fast")
	}
	d.name, d.arity, d.flags, d.acl = name, 1, flags, []string{speed, "@transaction"}
	d.group, d.since, d.complexity, d.summary = "transactions", "2.0.0", "O(1)", summary
	return &d
}
