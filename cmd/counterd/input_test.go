package main

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// A client without the password cannot make the daemon buffer a large
// command (it could hold 1 MB per connection, with or without
// COUNTERD_PASSWORD), and COUNTERD_CLIENT_QUERY_BUFFER_LIMIT bounds
// everyone's: past either the client is told and disconnected.
func TestInputBounded(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_PASSWORD=secret", "COUNTERD_CLIENT_QUERY_BUFFER_LIMIT=65536")
	// f sends the replies' commands, then in (the daemon may close the
	// connection before reading it all), and checks the replies and that
	// the connection is closed after the last.
	f := func(first, in string, replies ...string) {
		t.Helper()
		c := dialRaw(t, d.socket)
		if _, err := c.Write([]byte(first)); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = c.Write([]byte(in)) }()
		rd := bufio.NewReader(c)
		for _, want := range replies {
			if line, err := rd.ReadString('\n'); err != nil || line != want {
				t.Fatalf("got %q, %v; want %q", line, err, want)
			}
		}
		if b, err := rd.ReadByte(); err == nil {
			t.Fatalf("read %q after the error; want the connection closed", b)
		}
	}
	f("PING\r\n", "*2\r\n$4\r\nAUTH\r\n$524288\r\n"+strings.Repeat("a", 100<<10),
		"-NOAUTH Authentication required.\r\n", "-ERR Protocol error: unauthenticated bulk length\r\n")
	f("AUTH secret\r\n", "*2\r\n$4\r\nECHO\r\n$70000\r\n"+strings.Repeat("a", 70000)+"\r\n",
		"+OK\r\n", "-ERR Protocol error: too big request (limit 65536 bytes)\r\n")
	// The reply may reach us before the daemon writes its log line.
	if !d.waitLog("command past COUNTERD_CLIENT_QUERY_BUFFER_LIMIT", 30*time.Second) {
		t.Errorf("no warning logged for the command past the limit\n%s", d.log())
	}
	// An inline line past Redis's fixed 64 KiB is logged as that, not as
	// COUNTERD_CLIENT_QUERY_BUFFER_LIMIT (before, it named the setting).
	f("AUTH secret\r\n", "ECHO "+strings.Repeat("a", 70000)+"\r\n",
		"+OK\r\n", "-ERR Protocol error: too big inline request (limit 65535 bytes)\r\n")
	if !d.waitLog("inline command past the inline limit", 30*time.Second) {
		t.Errorf("no warning naming the inline limit\n%s", d.log())
	}
	d.stop()
}
