package server

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestPassword follows one connection through COUNTERD_PASSWORD: every
// command but AUTH, HELLO and QUIT is refused until it authenticates.
func TestPassword(t *testing.T) {
	t.Parallel()
	const noauth = "-NOAUTH Authentication required.\r\n"
	tests := []struct {
		name  string
		steps [][2]string // command (space-separated), reply
	}{
		{"auth", [][2]string{
			{"INCR a", noauth},
			{"PING", noauth},
			{"GET a", noauth},
			{"CLIENT ID", noauth},
			{"FOO x", "-ERR unknown command 'FOO', with args beginning with: 'x'\r\n"},
			{"GET", "-ERR wrong number of arguments for 'get' command\r\n"},
			{"HELLO 3", "-" + errHelloNoAuth + "\r\n"},
			{"AUTH nope", "-" + errWrongPass + "\r\n"},
			{"AUTH bob s3cret", "-" + errWrongPass + "\r\n"},
			{"INCR a", noauth},
			{"AUTH s3cret", "+OK\r\n"},
			{"INCR a", ":1\r\n"},
			{"DBSIZE", ":1\r\n"},
		}},
		{"auth with user", [][2]string{
			{"AUTH default s3cret", "+OK\r\n"},
			{"PING", "+PONG\r\n"},
		}},
		{"hello auth", [][2]string{
			{"HELLO 3 AUTH default nope", "-" + errWrongPass + "\r\n"},
			{"PING", noauth},
			{"HELLO 3 AUTH default s3cret SETNAME app", helloMap("3")},
			{"CLIENT GETNAME", "$3\r\napp\r\n"},
			{"INCR a", ":1\r\n"},
		}},
		{"quit", [][2]string{{"QUIT", "+OK\r\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newTestSession(t, "s3cret")
			for _, st := range tc.steps {
				if got := do(t, c, strings.Fields(st[0])...); got != st[1] {
					t.Errorf("%s: got %q; want %q", st[0], got, st[1])
				}
			}
		})
	}
}

// info runs INFO with args and returns its fields.
func infoFields(t *testing.T, c *session, args ...string) map[string]string {
	t.Helper()
	reply := do(t, c, append([]string{"INFO"}, args...)...)
	_, body, ok := strings.Cut(reply, "\r\n")
	if !ok || !strings.HasPrefix(reply, "$") {
		t.Fatalf("INFO %v: got %q; want a bulk string", args, reply)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(body, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

func TestInfo(t *testing.T) {
	t.Parallel()
	c := newTestSession(t, "")
	c.s.reg.now = func() time.Time { return fixedNow.Add(90 * time.Second) }
	do(t, c, "INCR", "a")
	do(t, c, "INCRBY", "b", "2")
	do(t, c, "NOPE")

	all := infoFields(t, c)
	for k, want := range map[string]string{
		"redis_version":                RedisVersion,
		"server_name":                  "counterd",
		"uptime_in_seconds":            "90",
		"tcp_port":                     "0",
		"maxclients":                   "10000",
		"blocked_clients":              "0",
		"total_connections_received":   "1",
		"total_commands_processed":     "4", // INFO itself counts
		"total_error_replies":          "1",
		"counterd_increments_accepted": "2",
		"counterd_pending_keys":        "2",
		"loading":                      "0",
		"role":                         "master",
		"db0":                          "keys=2,expires=0,avg_ttl=0",
	} {
		if got := all[k]; got != want {
			t.Errorf("INFO %s: got %q; want %q", k, got, want)
		}
	}
	for _, k := range []string{"counterd_version", "process_id", "used_memory", "used_memory_human", "used_cpu_user", "arch_bits", "os"} {
		if all[k] == "" {
			t.Errorf("INFO lacks %s", k)
		}
	}
	for _, arg := range []string{"all", "everything", "DEFAULT"} {
		if got := infoFields(t, c, arg); len(got) != len(all) {
			t.Errorf("INFO %s: got %d fields; want %d", arg, len(got), len(all))
		}
	}

	want := "# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0\r\n"
	if got := do(t, c, "INFO", "keyspace"); got != bulk(want) {
		t.Errorf("INFO keyspace: got %q; want %q", got, bulk(want))
	}
	if got := do(t, c, "INFO", "nosuch"); got != "$0\r\n\r\n" {
		t.Errorf("INFO nosuch: got %q; want an empty bulk string", got)
	}
	two := do(t, c, "INFO", "replication", "Cluster")
	if want := bulk("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n# Cluster\r\ncluster_enabled:0\r\n"); two != want {
		t.Errorf("INFO replication cluster: got %q; want %q", two, want)
	}
	do(t, c, "HELLO", "3")
	if got := do(t, c, "INFO", "keyspace"); got != verbatim(want) {
		t.Errorf("INFO keyspace in RESP3: got %q; want %q", got, verbatim(want))
	}
}

// TestClientList lists two connections, each with its own id, name, age
// and idle time.
func TestClientList(t *testing.T) {
	t.Parallel()
	a := newTestSession(t, "")
	s := a.s
	now := fixedNow
	s.reg.now = func() time.Time { return now }
	x, y := net.Pipe()
	t.Cleanup(func() { x.Close(); y.Close() })
	now = fixedNow.Add(5 * time.Second)
	b := s.newSession(x)
	do(t, b, "CLIENT", "SETNAME", "bee")
	now = fixedNow.Add(7 * time.Second)
	b.conn.touch(now)
	now = fixedNow.Add(10 * time.Second)
	a.conn.touch(fixedNow.Add(9 * time.Second))
	do(t, a, "INCR", "k")
	got := do(t, a, "CLIENT", "LIST")
	want := "id=1 addr=pipe:0 laddr=pipe:0 fd=-1 name= age=10 idle=1 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=incr user=default redir=-1 resp=2 lib-name= lib-ver=\n" +
		"id=2 addr=pipe:0 laddr=pipe:0 fd=-1 name=bee age=5 idle=3 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=client|setname user=default redir=-1 resp=2 lib-name= lib-ver=\n"
	// CLIENT LIST itself is a's last command by the time it lists.
	want = strings.Replace(want, "cmd=incr", "cmd=client|list", 1)
	if got != bulk(want) {
		t.Errorf("got %q; want %q", got, bulk(want))
	}
	if got, want := do(t, a, "CLIENT", "LIST", "ID", "2"), bulk(want[strings.Index(want, "id=2"):]); got != want {
		t.Errorf("CLIENT LIST ID 2: got %q; want %q", got, want)
	}
	s.removeSession(b)
	if got := do(t, a, "CLIENT", "LIST", "ID", "2"); got != "$0\r\n\r\n" {
		t.Errorf("after b ended: got %q; want nothing", got)
	}
}
