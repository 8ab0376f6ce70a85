package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/store"
)

// fixedNow is the clock of protocol tests.
var fixedNow = time.Unix(1700000000, 123456000)

// newTestSession returns a session of a fresh server (so its id is 1)
// with a fixed clock, on one end of a pipe nobody reads.
func newTestSession(t *testing.T, password string) *session {
	t.Helper()
	s := New(pending.New(emptyStore{}, pending.Options{}), Options{Password: password})
	s.reg.init(func() time.Time { return fixedNow })
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return s.newSession(a)
}

// emptyStore is a database that holds nothing and accepts every write.
type emptyStore struct{}

func (emptyStore) ApplyOnce(context.Context, store.BatchID, []change.Change) (store.ApplyResult, error) {
	return store.ApplyResult{}, nil
}

func (emptyStore) Read(_ context.Context, keys []string, ids []store.Identity) (store.Snapshot, error) {
	return store.Snapshot{Estimates: make([]store.Estimate, len(keys)), Marks: make([]store.Marks, len(ids))}, nil
}

func (emptyStore) Overflows(context.Context) (int64, error) { return 0, nil }

func (emptyStore) ReadBuckets(context.Context, string, change.Kind, int64, int64, []store.Identity) (store.BucketSnapshot, error) {
	return store.BucketSnapshot{}, nil
}

func (emptyStore) ReadTop(context.Context, string, change.Kind, int64, int, []string, []store.Identity) (store.TopSnapshot, error) {
	return store.TopSnapshot{}, nil
}

// do runs one command given as words and returns its reply.
func do(t *testing.T, c *session, words ...string) string {
	t.Helper()
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	c.out = c.out[:0]
	if err := c.exec(context.Background(), args); err != nil && err != errQuit {
		t.Fatalf("%q: %v", words, err)
	}
	c.endGroup(context.Background())
	return string(c.out)
}

// helloMap is HELLO's reply for connection 1 in protocol proto.
func helloMap(proto string) string {
	head := "*14\r\n"
	if proto == "3" {
		head = "%7\r\n"
	}
	return head + "$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.0\r\n" +
		"$5\r\nproto\r\n:" + proto + "\r\n$2\r\nid\r\n:1\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n" +
		"$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
}

// TestProtocolReplies checks each command's exact reply in RESP2 (a new
// connection) and RESP3 (after HELLO 3).
func TestProtocolReplies(t *testing.T) {
	t.Parallel()
	const (
		noPass   = "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
		wrongPwd = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
		tracking = "-ERR client-side caching is not supported: counterd's counts change without notice and it sends no invalidations, so cached values would go stale; disable client-side caching (client tracking) for counterd\r\n"
	)
	tests := []struct {
		name         string
		setup        [][]string // commands run first, replies ignored
		cmd          []string
		resp2, resp3 string // resp3 "" means the same as resp2
	}{
		{"hello no args", nil, []string{"HELLO"}, helloMap("2"), helloMap("3")},
		{"hello 2", nil, []string{"hello", "2"}, helloMap("2"), helloMap("2")},
		{"hello 3", nil, []string{"HELLO", "3"}, helloMap("3"), ""},
		{"hello 4", nil, []string{"HELLO", "4"}, "-NOPROTO unsupported protocol version\r\n", ""},
		{"hello 1", nil, []string{"HELLO", "1"}, "-NOPROTO unsupported protocol version\r\n", ""},
		{"hello not int", nil, []string{"HELLO", "x"}, "-ERR Protocol version is not an integer or out of range\r\n", ""},
		{"hello bad option", nil, []string{"HELLO", "3", "FOO"}, "-ERR Syntax error in HELLO option 'FOO'\r\n", ""},
		{"hello auth missing password", nil, []string{"HELLO", "3", "AUTH", "default"}, "-ERR Syntax error in HELLO option 'AUTH'\r\n", ""},
		{"hello auth nopass", nil, []string{"HELLO", "3", "AUTH", "default", "x", "SETNAME", "app"}, helloMap("3"), ""},
		{"hello auth other user", nil, []string{"HELLO", "3", "AUTH", "bob", "x"}, wrongPwd, ""},
		{"hello bad name", nil, []string{"HELLO", "3", "SETNAME", "a b"}, "-" + errBadName + "\r\n", ""},
		{"hello setname", [][]string{{"HELLO", "2", "SETNAME", "app"}}, []string{"CLIENT", "GETNAME"}, "$3\r\napp\r\n", ""},

		{"auth without password", nil, []string{"AUTH", "x"}, noPass, ""},
		{"auth default nopass", nil, []string{"AUTH", "default", "x"}, "+OK\r\n", ""},
		{"auth other user", nil, []string{"AUTH", "bob", "x"}, wrongPwd, ""},
		{"auth syntax", nil, []string{"AUTH", "a", "b", "c"}, "-ERR syntax error\r\n", ""},
		{"auth arity", nil, []string{"AUTH"}, "-ERR wrong number of arguments for 'auth' command\r\n", ""},

		{"client id", nil, []string{"CLIENT", "ID"}, ":1\r\n", ""},
		{"client getname unset", nil, []string{"client", "getname"}, "$-1\r\n", "_\r\n"},
		{"client setname", nil, []string{"CLIENT", "SETNAME", "app"}, "+OK\r\n", ""},
		{"client setname bad", nil, []string{"CLIENT", "SETNAME", "a\nb"}, "-" + errBadName + "\r\n", ""},
		{"client getname set", [][]string{{"CLIENT", "SETNAME", "app"}}, []string{"CLIENT", "GETNAME"}, "$3\r\napp\r\n", ""},
		{"client setname empty clears", [][]string{{"CLIENT", "SETNAME", "app"}, {"CLIENT", "SETNAME", ""}}, []string{"CLIENT", "GETNAME"}, "$-1\r\n", "_\r\n"},
		{"client setinfo", nil, []string{"CLIENT", "SETINFO", "LIB-NAME", "go-redis(,go1.26)"}, "+OK\r\n", ""},
		{"client setinfo ver", nil, []string{"CLIENT", "SETINFO", "lib-ver", "9.23.0"}, "+OK\r\n", ""},
		{"client setinfo bad attr", nil, []string{"CLIENT", "SETINFO", "color", "red"}, "-ERR Unrecognized option 'color'\r\n", ""},
		{"client setinfo bad value", nil, []string{"CLIENT", "SETINFO", "LIB-VER", "1 2"}, "-ERR lib-ver cannot contain spaces, newlines or special characters.\r\n", ""},
		{"client info", [][]string{{"CLIENT", "SETNAME", "app"}, {"CLIENT", "SETINFO", "LIB-NAME", "x"}, {"CLIENT", "SETINFO", "LIB-VER", "1"}},
			[]string{"CLIENT", "INFO"},
			bulk(clientLine("2")), verbatim(clientLine("3"))},
		{"client list", [][]string{{"CLIENT", "SETNAME", "app"}, {"CLIENT", "SETINFO", "LIB-NAME", "x"}, {"CLIENT", "SETINFO", "LIB-VER", "1"}},
			[]string{"CLIENT", "LIST"},
			bulk(strings.Replace(clientLine("2"), "client|info", "client|list", 1)),
			verbatim(strings.Replace(clientLine("3"), "client|info", "client|list", 1))},
		{"client list other id", nil, []string{"CLIENT", "LIST", "ID", "7"}, "$0\r\n\r\n", "=4\r\ntxt:\r\n"},
		{"client list pubsub", nil, []string{"CLIENT", "LIST", "TYPE", "pubsub"}, "$0\r\n\r\n", "=4\r\ntxt:\r\n"},
		{"client list bad", nil, []string{"CLIENT", "LIST", "FOO"}, "-ERR syntax error\r\n", ""},
		{"client tracking on", nil, []string{"CLIENT", "TRACKING", "ON"}, tracking, ""},
		{"client tracking off", nil, []string{"CLIENT", "TRACKING", "off"}, "+OK\r\n", ""},
		{"client unknown", nil, []string{"CLIENT", "KILL", "x"},
			"-ERR unknown subcommand 'KILL'. counterd's CLIENT has ID, GETNAME, SETNAME, SETINFO, INFO, LIST, TRACKING\r\n", ""},
		{"client sub arity", nil, []string{"CLIENT", "ID", "x"}, "-ERR wrong number of arguments for 'client|id' command\r\n", ""},
		{"client arity", nil, []string{"CLIENT"}, "-ERR wrong number of arguments for 'client' command\r\n", ""},

		{"echo", nil, []string{"ECHO", "hi"}, "$2\r\nhi\r\n", ""},
		{"echo arity", nil, []string{"ECHO"}, "-ERR wrong number of arguments for 'echo' command\r\n", ""},
		{"time", nil, []string{"TIME"}, "*2\r\n$10\r\n1700000000\r\n$6\r\n123456\r\n", ""},
		{"dbsize empty", nil, []string{"DBSIZE"}, ":0\r\n", ""},
		{"dbsize", [][]string{{"INCR", "a"}, {"INCRBY", "b", "3"}, {"INCR", "a"}}, []string{"DBSIZE"}, ":2\r\n", ""},
		{"select 0", nil, []string{"SELECT", "0"}, "+OK\r\n", ""},
		{"select 1", nil, []string{"SELECT", "1"}, "-ERR DB index is out of range (counterd has only database 0)\r\n", ""},
		{"select not int", nil, []string{"SELECT", "x"}, "-ERR value is not an integer or out of range\r\n", ""},
		{"config get", nil, []string{"CONFIG", "GET", "save", "appendonly"},
			"*4\r\n$4\r\nsave\r\n$0\r\n\r\n$10\r\nappendonly\r\n$0\r\n\r\n", "%2\r\n$4\r\nsave\r\n$0\r\n\r\n$10\r\nappendonly\r\n$0\r\n\r\n"},
		{"config set", nil, []string{"CONFIG", "SET", "a", "b"}, "-ERR unknown subcommand 'SET'. counterd's CONFIG has GET\r\n", ""},
		{"config get arity", nil, []string{"CONFIG", "GET"}, "-ERR wrong number of arguments for 'config|get' command\r\n", ""},

		{"incr", nil, []string{"INCR", "a"}, ":1\r\n", ""},
		{"incrby", nil, []string{"INCRBY", "a", "5"}, ":5\r\n", ""},
		{"decr", nil, []string{"DECR", "a"}, ":-1\r\n", ""},
		{"decrby", nil, []string{"DECRBY", "a", "5"}, ":-5\r\n", ""},
		{"get", [][]string{{"INCRBY", "a", "5"}}, []string{"GET", "a"}, "$1\r\n5\r\n", ""},
		{"mget", [][]string{{"INCRBY", "a", "5"}}, []string{"MGET", "a", "b"}, "*2\r\n$1\r\n5\r\n$1\r\n0\r\n", ""},
		{"count", [][]string{{"INCRBY", "a", "5"}}, []string{"COUNT", "a"}, "*3\r\n:5\r\n$5\r\nexact\r\n:0\r\n", ""},
		{"flush nothing pending", nil, []string{"FLUSH"}, "+OK\r\n", ""},
		{"hot", nil, []string{"HOT"}, "*0\r\n", ""},
		{"ping", nil, []string{"PING"}, "+PONG\r\n", ""},
		{"ping msg", nil, []string{"PING", "x"}, "$1\r\nx\r\n", ""},
		{"quit", nil, []string{"QUIT"}, "+OK\r\n", ""},
		{"get arity", nil, []string{"GET"}, "-ERR wrong number of arguments for 'get' command\r\n", ""},
		{"unknown", nil, []string{"FOO", "bar"}, "-ERR unknown command 'FOO', with args beginning with: 'bar'\r\n", ""},

		{"command count", nil, []string{"COMMAND", "COUNT"}, ":52\r\n", ""},
		{"command info unknown", nil, []string{"COMMAND", "INFO", "nope"}, "*1\r\n$-1\r\n", "*1\r\n_\r\n"},
		{"command info hot", nil, []string{"COMMAND", "INFO", "hot"},
			"*1\r\n*10\r\n$3\r\nhot\r\n:1\r\n*1\r\n+readonly\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@read\r\n+@slow\r\n*1\r\n+nondeterministic_output\r\n*0\r\n*0\r\n",
			"*1\r\n*10\r\n$3\r\nhot\r\n:1\r\n~1\r\n+readonly\r\n:0\r\n:0\r\n:0\r\n~2\r\n+@read\r\n+@slow\r\n~1\r\n+nondeterministic_output\r\n*0\r\n*0\r\n"},
		{"command info get", nil, []string{"COMMAND", "INFO", "GET"},
			"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n" +
				"*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+ACCESS\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n" +
				"$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n",
			"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n~3\r\n+@read\r\n+@string\r\n+@fast\r\n~0\r\n" +
				"*1\r\n%3\r\n$5\r\nflags\r\n~2\r\n+RO\r\n+ACCESS\r\n$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n%1\r\n$5\r\nindex\r\n:1\r\n" +
				"$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n"},
		{"command docs", nil, []string{"COMMAND", "DOCS", "echo", "nope"},
			"*2\r\n$4\r\necho\r\n*8\r\n$7\r\nsummary\r\n$25\r\nReturns the given string.\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$10\r\nconnection\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n",
			"%1\r\n$4\r\necho\r\n%4\r\n$7\r\nsummary\r\n$25\r\nReturns the given string.\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$10\r\nconnection\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n"},
		{"command docs sub", nil, []string{"COMMAND", "DOCS", "config|get"},
			"*2\r\n$10\r\nconfig|get\r\n*8\r\n$7\r\nsummary\r\n$86\r\nReturns an empty value for each parameter named (counterd has no Redis configuration).\r\n" +
				"$5\r\nsince\r\n$5\r\n2.0.0\r\n$5\r\ngroup\r\n$6\r\nserver\r\n$10\r\ncomplexity\r\n$39\r\nO(N) when N is the number of parameters\r\n", "<skip>"},
		{"command unknown sub", nil, []string{"COMMAND", "GETKEYS", "get", "a"},
			"-ERR unknown subcommand 'GETKEYS'. counterd's COMMAND has COUNT, DOCS, INFO, LIST\r\n", ""},
	}
	for _, tc := range tests {
		for _, proto := range []string{"2", "3"} {
			want := tc.resp2
			if proto == "3" && tc.resp3 != "" {
				want = tc.resp3
			}
			if want == "<skip>" {
				continue
			}
			t.Run(tc.name+"/resp"+proto, func(t *testing.T) {
				t.Parallel()
				c := newTestSession(t, "")
				if proto == "3" {
					do(t, c, "HELLO", "3")
				}
				for _, cmd := range tc.setup {
					do(t, c, cmd...)
				}
				if got := do(t, c, tc.cmd...); got != want {
					t.Errorf("%q: got %q; want %q", tc.cmd, got, want)
				}
			})
		}
	}
}

// clientLine is the CLIENT INFO line of connection 1 after the setup of
// "client info", in protocol proto.
func clientLine(proto string) string {
	return "id=1 addr=pipe:0 laddr=pipe:0 fd=-1 name=app age=0 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r " +
		"cmd=client|info user=default redir=-1 resp=" + proto + " lib-name=x lib-ver=1\n"
}

func bulk(s string) string     { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }
func verbatim(s string) string { return fmt.Sprintf("=%d\r\ntxt:%s\r\n", len(s)+4, s) }
