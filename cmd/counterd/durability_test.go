package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

// totals reads counter_totals over a fresh connection (a test's pool may
// hold connections a restarted server has closed).
func totals(t *testing.T, url string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT key, total FROM counter_totals`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	var (
		k string
		n int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { out[k] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// flush sends FLUSH until it succeeds; a daemon whose database just came
// back may need a few backoff periods (up to 3.2 s each) to drain.
func flush(t testing.TB, socket string) {
	t.Helper()
	c := client(t, socket)
	var err error
	// Generous, because a slow disk can hold up PostgreSQL's recovery and
	// commits for long: a slow machine must not fail the test.
	for start := time.Now(); time.Since(start) < 2*time.Minute; {
		if err = c.Do(context.Background(), "FLUSH").Err(); err == nil {
			return
		}
		if !strings.Contains(err.Error(), "flush not confirmed") {
			break
		}
	}
	t.Fatalf("FLUSH: %v", err)
}

// checkExact compares the database with what the load generator saw:
// every acknowledged increment is there, and nothing beyond the ones whose
// reply was lost to a kill.
func checkExact(t *testing.T, l *load, got map[string]int64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var acked, unknown, landedUnknown int64
	for k, a := range l.acked {
		u := l.unknown[k]
		g := got[k]
		if g < a || g > a+u {
			t.Errorf("%s: total %d; want %d acknowledged (+ up to %d whose reply was lost)", k, g, a, u)
		}
		acked += a
		unknown += u
		landedUnknown += g - a
	}
	for k, g := range got {
		if _, ok := l.acked[k]; !ok && g > l.unknown[k] {
			t.Errorf("%s: total %d but nothing acknowledged", k, g)
		}
	}
	t.Logf("acknowledged %d; %d sent with the reply lost to a kill, of which %d landed; %d refused", acked, unknown, landedUnknown, l.refused)
}

// Killing the daemon with SIGKILL again and again under load loses no
// acknowledged increment and applies none twice: with the default event
// loops, and with three loops, whose shards each round merges.
func TestKill9UnderLoad(t *testing.T) {
	t.Parallel()
	for _, loops := range []string{"0", "3"} {
		t.Run("loops="+loops, func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t, pgtest.Options{})
			d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=20ms", "COUNTERD_LOOPS="+loops)
			l := startLoad(t, d.socket, 6, 20, 50)
			const kills = 5
			for range kills {
				l.waitAcks(t, 3000)
				l.down()
				d.kill()
				d.restart()
				l.upAgain()
			}
			l.waitAcks(t, 3000)
			l.halt()
			flush(t, d.socket)
			checkExact(t, l, totals(t, db.URL))
			if l.refused != 0 {
				t.Errorf("%d increments refused; want 0", l.refused)
			}

			// A graceful stop leaves a journal with nothing to replay.
			d.stop()
			assertJournalEmpty(t, d.journal)
		})
	}
}

func assertJournalEmpty(t *testing.T, dir string) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 36 { // a segment header and no record
			t.Errorf("segment %s holds %d bytes after a graceful stop; want no records", s, fi.Size())
		}
	}
}

// With PostgreSQL crashed and restarted under load, clients see no error,
// and every increment lands exactly once.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	srv := pgtest.StartServer(t)
	db := pgtest.New(t, pgtest.Options{URL: srv.URL})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=20ms", "COUNTERD_FLUSH_TIMEOUT=1s")
	l := startLoad(t, d.socket, 4, 10, 30)
	l.waitAcks(t, 2000)
	srv.Stop("immediate")
	l.waitAcks(t, 5000) // accepted into the journal while the database is down

	// Reads and FLUSH answer promptly with an error rather than hang.
	ctx := context.Background()
	c := client(t, d.socket)
	if err := c.Get(ctx, "post:1").Err(); err == nil || !strings.Contains(err.Error(), "ERR") {
		t.Errorf("GET with the database down: got %v; want -ERR", err)
	}
	if err := c.Do(ctx, "FLUSH").Err(); err == nil || !strings.Contains(err.Error(), "flush not confirmed") {
		t.Errorf("FLUSH with the database down: got %v; want -ERR flush not confirmed", err)
	}
	body := httpGet(t, "http://"+d.metricsAddr()+"/healthz")
	if !strings.Contains(body, "ok") {
		t.Errorf("/healthz with the database down: %q", body)
	}

	srv.Start()
	l.waitAcks(t, 2000)
	l.halt()
	flush(t, d.socket)
	checkExact(t, l, totals(t, db.URL))
	if len(l.unknown) != 0 || l.refused != 0 {
		t.Errorf("clients saw errors: %d unknown, %d refused; want none", len(l.unknown), l.refused)
	}
}

// Past COUNTERD_JOURNAL_MAX_BYTES clients are told to back off; what was
// accepted lands once the database returns.
func TestJournalBound(t *testing.T) {
	t.Parallel()
	srv := pgtest.StartServer(t)
	db := pgtest.New(t, pgtest.Options{URL: srv.URL})
	d := startDaemon(t, db, "COUNTERD_JOURNAL_MAX_BYTES=1048576", "COUNTERD_FLUSH_TIMEOUT=1s")
	srv.Stop("immediate")
	ctx := context.Background()
	c := client(t, d.socket)
	want := map[string]int64{}
	var busy bool
	long := strings.Repeat("x", 200)
	for i := 0; i < 20000 && !busy; i++ {
		p := c.Pipeline()
		cmds := make([]*redis.IntCmd, 100)
		for j := range cmds {
			cmds[j] = p.Incr(ctx, long+":"+strconv.Itoa(i*100+j))
		}
		_, _ = p.Exec(ctx)
		for _, cmd := range cmds {
			switch err := cmd.Err(); {
			case err == nil:
				want[cmd.Args()[1].(string)]++
			case strings.HasPrefix(err.Error(), "BUSY journal full"):
				busy = true
			default:
				t.Fatalf("INCR: %v; want success or BUSY journal full", err)
			}
		}
	}
	if !busy {
		t.Fatal("no BUSY reply after 2,000,000 increments with a 1 MiB journal bound")
	}
	srv.Start()
	flush(t, d.socket)
	got := totals(t, db.URL)
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("%s: got %d; want %d", k[len(long):], got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("keys in the database: %d; want %d acknowledged", len(got), len(want))
	}
	t.Logf("%d increments accepted before the bound", len(want))
	// Once drained, increments are accepted again.
	if err := c.Incr(ctx, "after").Err(); err != nil {
		t.Fatalf("INCR after the drain: %v", err)
	}
}

// Under COUNTERD_ACK=commit an increment is in counter_totals when its
// reply arrives.
func TestAckCommit(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_ACK=commit", "COUNTERD_FLUSH_INTERVAL=1h")
	ctx := context.Background()
	c := client(t, d.socket)
	for i := 1; i <= 20; i++ {
		if err := c.Incr(ctx, "post:c").Err(); err != nil {
			t.Fatal(err)
		}
		if got := total(t, db, "post:c"); got != int64(i) {
			t.Fatalf("after acknowledgement %d: counter_totals %d; want %d", i, got, i)
		}
	}
}

// A torn or corrupt journal tail (a crash mid-write) is cut at the last
// good record, whose prefix is applied exactly once.
func TestCorruptJournalTail(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	ctx := context.Background()
	send := func(key string, n int) {
		t.Helper()
		c := client(t, d.socket)
		for range n {
			if err := c.Incr(ctx, key).Err(); err != nil { // one record each
				t.Fatal(err)
			}
		}
	}
	// The last segment holding records: the journal keeps the next one
	// prepared (its 36-byte header only) ahead of the rotation.
	lastSegment := func() string {
		t.Helper()
		segs, _ := filepath.Glob(filepath.Join(d.journal, "*.seg"))
		for i := len(segs) - 1; i >= 0; i-- {
			if fi, err := os.Stat(segs[i]); err == nil && fi.Size() > 36 {
				return segs[i]
			}
		}
		t.Fatal("no journal segment with records")
		return ""
	}

	// Torn: the last record loses its final bytes.
	send("torn", 10)
	d.kill()
	seg := lastSegment()
	fi, _ := os.Stat(seg)
	if err := os.Truncate(seg, fi.Size()-3); err != nil {
		t.Fatal(err)
	}
	d.restart()
	if !strings.Contains(d.log(), "corrupt") && !strings.Contains(d.log(), "torn") {
		t.Errorf("restart log does not report the torn tail:\n%s", d.log())
	}
	flush(t, d.socket)
	if got := totals(t, db.URL)["torn"]; got != 9 {
		t.Fatalf("torn: got %d; want 9 (the 10th record was torn)", got)
	}

	// Bit-flipped: the 5th of 10 records is damaged and skipped; 9 survive.
	send("flip", 10)
	d.kill()
	seg = lastSegment()
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	const header, record = 36, 8 + 1 + 1 + 1 + 4 + 1 + 1 + 1 // kind total, "flip", delta 1, variance 0, bucket 0
	if len(b) != header+10*record {
		t.Fatalf("segment is %d bytes; want %d (has the record format changed?)", len(b), header+10*record)
	}
	b[header+4*record+10] ^= 0x20
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d.restart()
	flush(t, d.socket)
	// A further crash and restart must not apply anything again.
	d.kill()
	d.restart()
	flush(t, d.socket)
	got := totals(t, db.URL)
	if got["flip"] != 9 || got["torn"] != 9 {
		t.Fatalf("after restarts: flip %d, torn %d; want 9 and 9", got["flip"], got["torn"])
	}
}

// A full disk is an error to the client, never a silent loss, and the
// daemon keeps serving.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	mnt := smallDisk(t)
	srv := pgtest.StartServer(t)
	db := pgtest.New(t, pgtest.Options{URL: srv.URL})
	d := startDaemon(t, db, "COUNTERD_JOURNAL_DIR="+filepath.Join(mnt, "j"), "COUNTERD_FLUSH_TIMEOUT=1s")
	srv.Stop("immediate") // nothing drains, so the disk fills
	ctx := context.Background()
	c := client(t, d.socket)
	want := map[string]int64{}
	var full bool
	long := strings.Repeat("y", 200)
	for i := 0; i < 5000 && !full; i++ {
		key := long + ":" + strconv.Itoa(i)
		switch err := c.Incr(ctx, key).Err(); {
		case err == nil:
			want[key]++
		case strings.Contains(err.Error(), "journal write failed") && strings.Contains(err.Error(), "no space left"):
			full = true
		default:
			t.Fatalf("INCR: %v; want success or a journal write error", err)
		}
	}
	if !full {
		t.Fatal("the 256 KiB journal disk never filled")
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with a full disk: %v", err)
	}
	srv.Start()
	flush(t, d.socket) // drains, freeing the disk
	got := totals(t, db.URL)
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("%s: got %d; want %d", k[len(long):], got[k], w)
		}
	}
	if err := c.Incr(ctx, "after").Err(); err != nil {
		t.Fatalf("INCR after the disk drained: %v", err)
	}
	t.Logf("%d increments accepted before the disk filled", len(want))
}

// A daemon restarted on a full journal disk starts, serves reads, refuses
// increments with an error saying why, and accepts them again once space
// returns. Before, it exited: "create segment N: no space left on device".
func TestStartOnFullDisk(t *testing.T) {
	t.Parallel()
	mnt := smallDisk(t)
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_JOURNAL_DIR="+filepath.Join(mnt, "j"))
	ctx := context.Background()
	c := client(t, d.socket)
	if err := c.IncrBy(ctx, "k", 5).Err(); err != nil {
		t.Fatal(err)
	}
	flush(t, d.socket)
	d.stop()

	fill(t, filepath.Join(mnt, "filler"))

	d.restart()
	c = client(t, d.socket)
	if !strings.Contains(d.log(), "no space left on device") {
		t.Fatalf("the daemon did not meet a full disk at start:\n%s", d.log())
	}
	if got, err := c.Get(ctx, "k").Int64(); err != nil || got != 5 {
		t.Fatalf("GET on a full disk: got %d, %v; want 5", got, err)
	}
	// Dropping the empty segment the stop left may have freed a page.
	fill(t, filepath.Join(mnt, "filler2"))
	if err := c.Incr(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("INCR on a full disk: got %v; want an error saying the disk is full\n%s", err, d.log())
	}
	for _, f := range []string{"filler", "filler2"} {
		if err := os.Remove(filepath.Join(mnt, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Incr(ctx, "k").Err(); err != nil {
		t.Fatalf("INCR once space returned: %v", err)
	}
	flush(t, d.socket)
	if got := total(t, db, "k"); got != 6 {
		t.Fatalf("k: got %d; want 6", got)
	}
}

// fill writes path until the file system has no block left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 1 << 20 {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			return
		}
	}
	t.Fatal("the file system never filled")
}

// smallDisk mounts a 256 KiB tmpfs for a journal directory until the test
// ends, or skips the test where that is impossible (not root).
func smallDisk(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs as the journal directory")
	}
	mnt := shortDir(t)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	return mnt
}
