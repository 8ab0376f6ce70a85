package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/pgtest"
)

// incrs is n pipelined INCR k commands.
func incrs(n int) []byte {
	return bytes.Repeat([]byte("*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n"), n)
}

// A client that writes a million pipelined INCRs from one goroutine while
// another reads the replies gets every reply: counterd stops reading
// while its replies are unsent, and carries on as the client reads.
func TestPipelineMillion(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(incrs(n))
		wrote <- err
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	reply := make([]byte, 4)
	for i := range n {
		if _, err := io.ReadFull(r, reply); err != nil || string(reply) != ":1\r\n" {
			t.Fatalf("reply %d: %q, %v; want :1", i, reply, err)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatalf("write: %v", err)
	}
	flush(t, d.socket)
	if v, err := client(t, d.socket).Get(context.Background(), "k").Int64(); err != nil || v != n {
		t.Fatalf("GET k: %d, %v; want %d", v, err, n)
	}
}

// A client that never reads its replies is disconnected once they have
// waited COUNTERD_CLIENT_WRITE_TIMEOUT, with a warning and a metric; the
// daemon keeps serving everyone else, and every increment it acknowledged
// is counted.
//
// The smallest output limit makes the daemon stop reading the client
// after 512 KiB of unsent replies (about 131,000 INCRs), so the client's
// writes block until the daemon gives up on it, however fast the machine
// reads: the test writes until the daemon closes the connection.
func TestClientNeverReads(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_CLIENT_OUTPUT_LIMIT=1048576", "COUNTERD_CLIENT_WRITE_TIMEOUT=1s")
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	// 4M INCRs is 30 times what the daemon takes before it stops reading
	// (socket buffers included); a daemon that read them all would have
	// passed the output limit with 16 MB of unsent replies.
	const chunk, chunks = 16 << 10, 256
	batch := incrs(chunk)
	var werr error
	sent := 0
	for range chunks {
		n, err := c.Write(batch)
		sent += n
		if werr = err; err != nil {
			break
		}
	}
	switch {
	case werr == nil:
		t.Fatalf("wrote %d INCRs without reading and the connection is still open", chunk*chunks)
	case errors.Is(werr, os.ErrDeadlineExceeded):
		t.Fatalf("the daemon did not close a connection that read nothing within 2 minutes\n%s", d.log())
	}
	if !d.waitLog("did not read its replies", time.Minute) {
		t.Fatalf("no warning about the client (write error %v)\n%s", werr, d.log())
	}
	for _, line := range strings.Split(d.log(), "\n") {
		if strings.Contains(line, "did not read its replies") && (!strings.Contains(line, "level=WARN") || !strings.Contains(line, "conn=")) {
			t.Fatalf("log line %q: want a warning naming the connection", line)
		}
	}
	// The replies the daemon sent before it closed the connection are
	// still in the socket: those increments were acknowledged.
	replies, _ := io.ReadAll(c)
	acked := int64(bytes.Count(replies, []byte(":1\r\n")))
	if int64(len(replies)) != 4*acked {
		t.Fatalf("read %d bytes of replies, %d of them :1; want only :1 replies", len(replies), acked)
	}
	if err := client(t, d.socket).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after the disconnection: %v", err)
	}
	if m := httpGet(t, "http://"+d.metricsAddr()+"/metrics"); !strings.Contains(m, `counterd_clients_disconnected_total{reason="write_timeout"} 1`) {
		t.Fatalf("metrics lack the disconnection:\n%s", m)
	}
	flush(t, d.socket)
	// Counted: at least every acknowledged INCR, at most every one sent.
	if got, most := total(t, db, "k"), int64(sent/len(incrs(1))); got < acked || got > most {
		t.Fatalf("counter_totals k: got %d; want between %d acknowledged and %d sent", got, acked, most)
	}
}

// A client that pipelines reads (MGET of 1,000 keys, or GET) and never
// takes a reply is disconnected at COUNTERD_CLIENT_WRITE_TIMEOUT, under
// either I/O mode, holding at most COUNTERD_CLIENT_OUTPUT_LIMIT of
// replies: the daemon stops reading it while half of that is unsent, as
// for increments. The event loops used to keep a blocking command's
// replies unwritten while the next one ran, and skipped a connection busy
// with one when they checked write timeouts, so such a client was cut
// only by the output limit (after 72 s at the default); the goroutines
// noticed a failed write only at the next one, never for a client that had
// sent its whole pipeline.
//
// Nothing depends on speed: "until closed" clients write until the daemon
// closes them, and the "then waits" client's replies are more than a
// socket buffer holds and less than half the limit, so they wait for the
// timeout however fast the daemon answers. (That client finds the old
// goroutines' gap only if the daemon answers its 40 MGETs within the 5 s
// timeout, which any machine does.) The daemon's own warning says how
// many bytes it held.
func TestClientNeverReadsReads(t *testing.T) {
	t.Parallel()
	// Totals of 19 digits make each GET reply 26 bytes, MGET's 26 KB.
	const keys, value = 1000, 1_000_000_000_000_000_000
	var mget, gets bytes.Buffer
	fmt.Fprintf(&mget, "*%d\r\n$4\r\nMGET\r\n", keys+1)
	for i := range keys {
		k := "k" + strconv.Itoa(i)
		fmt.Fprintf(&mget, "$%d\r\n%s\r\n", len(k), k)
		fmt.Fprintf(&gets, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(k), k)
	}
	modes := []string{"goroutines"}
	if config.EventLoops {
		modes = append(modes, "loop")
	}
	cases := []struct {
		name  string
		limit int
		batch []byte
		// batches is how many batches the client sends before it waits;
		// 0: it writes until the daemon closes the connection.
		batches int
		timeout string
	}{
		{"MGET until closed", 1 << 20, mget.Bytes(), 0, "1s"},
		{"GET until closed", 1 << 20, gets.Bytes(), 0, "1s"},
		// 40 MGETs: 1 MB of replies, an eighth of the limit's half.
		{"MGET then waits", 16 << 20, mget.Bytes(), 40, "5s"},
	}
	for _, mode := range modes {
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				db := pgtest.New(t, pgtest.Options{})
				d := startDaemon(t, db, "COUNTERD_IO="+mode,
					"COUNTERD_CLIENT_OUTPUT_LIMIT="+strconv.Itoa(tc.limit), "COUNTERD_CLIENT_WRITE_TIMEOUT="+tc.timeout)
				ctx := context.Background()
				pipe := client(t, d.socket).Pipeline()
				for i := range keys {
					pipe.IncrBy(ctx, "k"+strconv.Itoa(i), value)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					t.Fatal(err)
				}
				flush(t, d.socket) // the reads go to PostgreSQL

				c, err := net.Dial("unix", d.socket)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_ = c.(*net.UnixConn).SetReadBuffer(4 << 10)
				// Generous: under the race detector on a loaded machine the
				// goroutines take tens of seconds to fill the socket with
				// GET replies.
				_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
				for n := 0; tc.batches == 0 || n < tc.batches; n++ {
					if _, err := c.Write(tc.batch); err != nil {
						if errors.Is(err, os.ErrDeadlineExceeded) {
							t.Fatalf("the daemon did not close a connection that read nothing within 5 minutes\n%s", d.log())
						}
						break // closed by the daemon
					}
				}
				// Either warning: the output limit's fails at once.
				if !d.waitLog("closing connection:", 2*time.Minute) || !strings.Contains(d.log(), "did not read its replies") {
					t.Fatalf("no write timeout warning\n%s", d.log())
				}
				// The daemon closed the connection: what it had written
				// is read, then the end, well before the deadline.
				_ = c.SetReadDeadline(time.Now().Add(time.Minute))
				if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("connection still open a minute after the write timeout warning\n%s", d.log())
				}
				for _, line := range strings.Split(d.log(), "\n") {
					if !strings.Contains(line, "did not read its replies") {
						continue
					}
					_, rest, _ := strings.Cut(line, "pending_bytes=")
					held, err := strconv.Atoi(strings.Fields(rest + " ")[0])
					if err != nil || held <= 0 || held > tc.limit {
						t.Fatalf("warning %q: want pending_bytes between 1 and the limit, %d", line, tc.limit)
					}
				}
				for reason, want := range map[string]float64{"write_timeout": 1, "output_limit": 0} {
					if got := metric(t, d, `counterd_clients_disconnected_total{reason="`+reason+`"}`); got != want {
						t.Errorf("counterd_clients_disconnected_total{reason=%q} = %v; want %v\n%s", reason, got, want, d.log())
					}
				}
			})
		}
	}
}
