package server

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/resp"
)

// SET and DEL (change.Set): a Set replaces a key's total (DEL is a Set to
// 0), accepted like an increment: as a change in the journal before the
// reply, committed in order with the rounds. DEL reads its keys first for
// its reply; that read and the change are not atomic, so under
// concurrent increments the reply is advisory while the change itself is
// exact.

// setCommands are SET's and DEL's entries of the command table.
var setCommands = []*cmdSpec{
	{name: "del", arity: -2, flags: []string{"write"}, firstKey: 1, lastKey: -1, step: 1,
		keyFlags: []string{"RM", "DELETE"}, acl: []string{"@keyspace", "@write", "@slow"},
		group: "generic", since: "1.0.0", complexity: "O(N) where N is the number of keys",
		summary: "Zeroes counters: what is committed for them now and this daemon's pending increments are removed; replies how many were not 0.",
		parse:   parseDel, blocking: true, multi: multiQueued},
	{name: "set", arity: -3, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 1, step: 1,
		keyFlags: []string{"RW", "ACCESS", "UPDATE"}, acl: []string{"@write", "@string", "@slow"},
		group: "string", since: "1.0.0", complexity: "O(1)",
		summary: "Sets a counter to an integer, as DEL then INCRBY would; EX, PX, EXAT and PXAT set its expiry.",
		parse:   parseSetCall, blocking: true, multi: multiQueued},
}

// parseSetCall describes SET key n [EX s | PX ms | EXAT t | PXAT t]:
// OK once its changes are accepted.
func parseSetCall(args [][]byte, now time.Time) (call, string) {
	items, msg := parseSet(args, now)
	return call{changes: items, reply: replyOK}, msg
}

// parseDel describes DEL key...: it reads its keys, then zeroes them
// (a Set to 0 each, which also empties an exact set: clearMembers), and
// replies how many were not 0. A key named twice
// counts once, as in Redis.
func parseDel(args [][]byte, now time.Time) (call, string) {
	names, msg := keyNames(args[1:])
	if msg != "" {
		return call{}, msg
	}
	if len(names) > 1 {
		seen := make(map[string]bool, len(names))
		names = slices.DeleteFunc(names, func(k string) bool {
			dup := seen[k]
			seen[k] = true
			return dup
		})
	}
	items := make([]change.Change, 0, 2*len(names))
	for _, k := range names {
		items = append(items, change.Change{Key: k, Kind: change.Set}, clearMembers(k, now))
	}
	return call{changes: items, reads: names, reply: replyDel}, ""
}

func replyDel(_ *Server, out []byte, _ call, reads []read) []byte {
	n := int64(0)
	for _, r := range reads {
		if exists(r.Estimate) {
			n++
		}
	}
	return resp.AppendInt(out, n)
}

// parseSet parses SET key n [EX s | PX ms | EXAT t | PXAT t] into its
// changes: a Set, and an Expire when an option is given (an expiry
// already past makes it a DEL, as a key that expired at once). Redis's
// other options (NX, XX, GET, KEEPTTL) are refused by name; anything else
// is Redis's syntax error.
func parseSet(args [][]byte, now time.Time) ([]change.Change, string) {
	if err := checkKey(args[1]); err != nil {
		return nil, err.Error()
	}
	n, ok := resp.ParseInt(args[2])
	if !ok {
		return nil, errNotInt
	}
	items := []change.Change{{Key: string(args[1]), Kind: change.Set, Delta: n}, clearMembers(string(args[1]), now)}
	var unit string
	var t int64
	for i := 3; i < len(args); i++ {
		opt := string(bytes.ToUpper(args[i]))
		switch opt {
		case "NX", "XX", "GET", "KEEPTTL":
			return nil, fmt.Sprintf("ERR SET option %q is not supported by counterd (only EX, PX, EXAT and PXAT)", opt)
		case "EX", "PX", "EXAT", "PXAT":
			if unit != "" || i+1 == len(args) {
				return nil, "ERR syntax error"
			}
			i++
			if t, ok = resp.ParseInt(args[i]); !ok {
				return nil, errNotInt
			}
			unit = opt
		default:
			return nil, "ERR syntax error"
		}
	}
	if unit == "" {
		return items, ""
	}
	at, ok := expiryAt(unit, t, now)
	if t <= 0 || !ok {
		return nil, "ERR invalid expire time in 'set' command"
	}
	if at <= now.Unix() {
		items[0].Delta = 0
		return items, ""
	}
	return append(items, change.Change{Key: items[0].Key, Kind: change.Expire, Delta: at}), ""
}
