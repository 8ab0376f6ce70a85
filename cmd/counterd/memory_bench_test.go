package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// BenchmarkDaemonRSS measures the daemon's resident memory (VmRSS from
// /proc) per connection and after a burst of keys, on a real process:
//
//	make gobench BENCH=DaemonRSS
//
// Per connection (300 of them, RSS growth divided by 300): idle after
// one PING; idle before AUTH with COUNTERD_PASSWORD set; holding ~1 MB of
// an unfinished command, authenticated and before AUTH. Burst: 1,000,000
// distinct keys pipelined, then FLUSH; the peak (VmHWM), RSS 1 s and 10 s
// after the flush, and the Go heap in use then.
func BenchmarkDaemonRSS(b *testing.B) {
	db := pgtest.New(b, pgtest.Options{})
	const conns = 300
	perConn := func(name, password string, send func(c net.Conn) error) {
		b.Run(name, func(b *testing.B) {
			var env []string
			if password != "" {
				env = append(env, "COUNTERD_PASSWORD="+password)
			}
			for b.Loop() {
				d := startDaemon(b, db, env...)
				warm(b, d.socket)
				base := settledRSS(b, d)
				var open []net.Conn
				for range conns {
					c, err := net.Dial("unix", d.socket)
					if err != nil {
						b.Fatal(err)
					}
					_ = c.SetDeadline(time.Now().Add(time.Minute))
					open = append(open, c)
					if err := send(c); err != nil {
						b.Fatal(err)
					}
				}
				rss := settledRSS(b, d)
				b.ReportMetric(float64(rss-base)/conns, "rss-B/conn")
				for _, c := range open {
					c.Close()
				}
				d.stop()
			}
		})
	}
	pingOnce := func(c net.Conn) error {
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		_, err := bufio.NewReader(c).ReadString('\n')
		return err
	}
	// An MGET whose second key (512,000 bytes announced) is cut off
	// 1,000,000 bytes into the command.
	partial := []byte("*3\r\n$4\r\nMGET\r\n$512000\r\n" + strings.Repeat("a", 512000) + "\r\n$512000\r\n")
	partial = append(partial, bytes.Repeat([]byte("b"), 1_000_000-len(partial))...)
	perConn("idle", "", pingOnce)
	perConn("idle-unauth", "secret", pingOnce) // -NOAUTH
	perConn("partial-1MB", "", func(c net.Conn) error {
		_, err := c.Write(partial)
		return err
	})
	perConn("partial-1MB-unauth", "secret", func(c net.Conn) error {
		_, _ = c.Write(partial) // refused and closed at the bulk header once bounded
		return nil
	})

	b.Run("burst-1M-keys", func(b *testing.B) {
		for b.Loop() {
			d := startDaemon(b, db, "COUNTERD_PPROF=true")
			warm(b, d.socket)
			base := settledRSS(b, d)
			burst(b, d.socket, 1_000_000)
			flush(b, d.socket)
			time.Sleep(time.Second) // a measurement, not a wait for an event
			after := rss(b, d, "VmRSS")
			time.Sleep(9 * time.Second) // Go's scavenger returns memory gradually
			later := rss(b, d, "VmRSS")
			b.ReportMetric(float64(base)/(1<<20), "rss-start-MB")
			b.ReportMetric(float64(rss(b, d, "VmHWM"))/(1<<20), "rss-peak-MB")
			b.ReportMetric(float64(after)/(1<<20), "rss-1s-MB")
			b.ReportMetric(float64(later)/(1<<20), "rss-10s-MB")
			b.ReportMetric(metric(b, d, "go_memstats_heap_inuse_bytes")/(1<<20), "heap-10s-MB")
			d.stop()
		}
	})
}

// warm makes the daemon serve one connection, so the first connection's
// one-time costs are in the baseline.
func warm(tb testing.TB, socket string) {
	tb.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		tb.Fatal(err)
	}
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		tb.Fatal(err) // +PONG, or -NOAUTH before AUTH
	}
}

// rss reads a field (VmRSS, VmHWM) of the daemon's /proc status, in bytes.
func rss(tb testing.TB, d *daemon, field string) int64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc status", field)
	return 0
}

// settledRSS waits until VmRSS stops moving (bounded), then returns it.
func settledRSS(tb testing.TB, d *daemon) int64 {
	tb.Helper()
	last := rss(tb, d, "VmRSS")
	for range 50 {
		time.Sleep(200 * time.Millisecond) // RSS settling is measured over real time, not signalled
		now := rss(tb, d, "VmRSS")
		if now == last {
			return now
		}
		last = now
	}
	return last
}

// metric reads one unlabelled metric from the daemon's /metrics.
func metric(tb testing.TB, d *daemon, name string) float64 {
	tb.Helper()
	for _, line := range strings.Split(httpGet(tb, "http://"+d.metricsAddr()+"/metrics"), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return v
		}
	}
	tb.Fatalf("no %s in /metrics", name)
	return 0
}

// burst pipelines INCR burst:0 .. burst:n-1 on one connection and reads
// every reply.
func burst(tb testing.TB, socket string, n int) {
	tb.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	errc := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(c, 64<<10)
		for i := range n {
			k := "burst:" + strconv.Itoa(i)
			fmt.Fprintf(w, "*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n", len(k), k)
		}
		errc <- w.Flush()
	}()
	rd := bufio.NewReaderSize(c, 64<<10)
	for i := range n {
		line, err := rd.ReadString('\n')
		if err != nil {
			tb.Fatalf("reply %d: %v", i, err)
		}
		if line != ":1\r\n" {
			tb.Fatalf("reply %d: got %q; want :1", i, line)
		}
	}
	if err := <-errc; err != nil {
		tb.Fatal(err)
	}
}
