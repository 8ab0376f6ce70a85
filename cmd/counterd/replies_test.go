package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

var updateReplies = flag.Bool("update-replies", false, "write testdata/replies.golden from this run")

// TestRepliesGolden sends testdata/replies.script, every command
// immediate and inside MULTI/EXEC (errors inside MULTI, DISCARD, nested
// MULTI, EXEC without MULTI, wrong arity, RESP3), to the real daemon and
// compares the raw bytes of every reply with testdata/replies.golden,
// recorded from the daemon before the command table and MULTI were
// reshaped (issue 34): replies are byte-identical. The script runs one
// command at a time and again pipelined in one write, under each I/O
// mode, each on a fresh schema; all four must give the golden bytes.
//
// COUNTERD_REPLIES_BIN runs another build instead of this package's (to
// record from, or compare with, an older commit): -update-replies writes
// the golden file from the run.
func TestRepliesGolden(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("testdata/replies.script")
	if err != nil {
		t.Fatal(err)
	}
	cmds := parseScript(string(script))
	type run struct {
		io        string
		pipelined bool
	}
	runs := []run{{"loop", false}, {"goroutines", false}, {"loop", true}, {"goroutines", true}}
	got := make([]string, len(runs))
	for i, r := range runs {
		name := fmt.Sprintf("%s/pipelined=%v", r.io, r.pipelined)
		t.Run(name, func(t *testing.T) {
			db := pgtest.New(t, pgtest.Options{})
			d := newDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h", "COUNTERD_IO="+r.io) // the last setting wins
			d.bin = os.Getenv("COUNTERD_REPLIES_BIN")
			d.start()
			t.Cleanup(d.kill)
			got[i] = record(t, d.socket, cmds, r.pipelined)
		})
	}
	if *updateReplies {
		if err := os.WriteFile("testdata/replies.golden", []byte(got[0]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/replies.golden")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		if got[i] != string(want) {
			t.Errorf("io=%s pipelined=%v: replies differ from testdata/replies.golden:\n%s", r.io, r.pipelined, firstDiff(got[i], string(want)))
		}
	}
}

type scriptCmd struct {
	words  []string
	masked bool // only the reply's type is recorded
}

func parseScript(s string) []scriptCmd {
	var cmds []scriptCmd
	for _, line := range strings.Split(s, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := scriptCmd{}
		if strings.HasPrefix(line, "~") {
			c.masked, line = true, line[1:]
		}
		c.words = strings.Split(line, " ")
		cmds = append(cmds, c)
	}
	return cmds
}

// record sends cmds to socket and returns each command with its raw
// reply, one a line.
func record(t *testing.T, socket string, cmds []scriptCmd, pipelined bool) string {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	encode := func(words []string) []byte {
		b := []byte("*" + strconv.Itoa(len(words)) + "\r\n")
		for _, w := range words {
			b = append(b, "$"+strconv.Itoa(len(w))+"\r\n"+w+"\r\n"...)
		}
		return b
	}
	if pipelined {
		var all []byte
		for _, cmd := range cmds {
			all = append(all, encode(cmd.words)...)
		}
		go func() { _, _ = c.Write(all) }()
	}
	r := bufio.NewReader(c)
	var out strings.Builder
	for _, cmd := range cmds {
		if !pipelined {
			if _, err := c.Write(encode(cmd.words)); err != nil {
				t.Fatalf("%q: %v", cmd.words, err)
			}
		}
		var raw bytes.Buffer
		if err := readReply(r, &raw); err != nil {
			t.Fatalf("%q: reading the reply: %v (so far:\n%s)", cmd.words, err, out.String())
		}
		reply := strconv.Quote(raw.String())
		if cmd.masked {
			reply = fmt.Sprintf("<%c ...>", raw.Bytes()[0])
		}
		fmt.Fprintf(&out, "%s -> %s\n", strings.Join(cmd.words, " "), reply)
	}
	return out.String()
}

// readReply copies one whole RESP2 or RESP3 reply from r to raw.
func readReply(r *bufio.Reader, raw *bytes.Buffer) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	raw.WriteString(line)
	if len(line) < 3 {
		return fmt.Errorf("short line %q", line)
	}
	n, _ := strconv.Atoi(strings.TrimSuffix(line[1:], "\r\n"))
	switch line[0] {
	case '$', '=', '!': // bulk string, verbatim string, bulk error
		if n < 0 {
			return nil
		}
		_, err := io.CopyN(raw, r, int64(n)+2)
		return err
	case '*', '~', '>': // array, set, push
		for range max(n, 0) {
			if err := readReply(r, raw); err != nil {
				return err
			}
		}
	case '%', '|': // map, attribute
		for range 2 * n {
			if err := readReply(r, raw); err != nil {
				return err
			}
		}
	}
	return nil
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\ngot  %s\nwant %s", i+1, gl, wl)
		}
	}
	return "(no difference by line)"
}
