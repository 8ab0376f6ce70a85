package server

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/windows"
)

// A PFADD member this daemon has already journaled and confirmed for its
// key is answered 0 and not journaled again; one whose PFADD was refused
// is journaled when it comes again and answered 1; a key with time
// windows is always journaled (its member is new to each bucket). Served
// in each I/O mode.
func TestPFADDKnownMemberNotJournaled(t *testing.T) {
	t.Parallel()
	for _, mode := range ioModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			jr := openCounting(t)
			win, err := windows.Parse("w:*=minute:2h")
			if err != nil {
				t.Fatal(err)
			}
			// Two pending keys (counters, members, a windowed member's
			// bucket) at most: a third is refused (-BUSY) until a FLUSH
			// writes the others.
			buf := pending.New(heldMembersStore{}, pending.Options{Journal: jr, MaxPendingKeys: 2, Windows: win})
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan struct{})
			go func() { _ = buf.Run(ctx, ctx); close(ran) }()
			t.Cleanup(func() { cancel(); <-ran })
			s := New(buf, Options{IO: mode})
			path := serveUnix(t, s)
			c := dialLoop(t, path)
			step := func(what, cmd string, want string, appends int64) {
				t.Helper()
				before := jr.appends.Load()
				c.send(cmd)
				c.expect(want)
				if got := jr.appends.Load() - before; got != appends {
					t.Fatalf("%s: %d journal appends; want %d", what, got, appends)
				}
			}
			step("a new member", "PFADD u m\r\n", ":1\r\n", 1)
			step("the same member again", "PFADD u m\r\n", ":0\r\n", 0)
			step("flush", "FLUSH\r\n", "+OK\r\n", 0)
			step("another member", "PFADD u m2\r\n", ":1\r\n", 1)
			step("flush", "FLUSH\r\n", "+OK\r\n", 0)
			step("the first, after its round", "PFADD u m\r\n", ":0\r\n", 0)

			step("a counter takes a pending key", "INCR a\r\n", ":1\r\n", 1)
			step("and another the other", "INCR b\r\n", ":1\r\n", 1)
			c.send("PFADD v m\r\n")
			if line, err := c.r.ReadString('\n'); err != nil || len(line) < 5 || line[:5] != "-BUSY" {
				t.Fatalf("PFADD past the pending-key limit: %q, %v; want -BUSY", line, err)
			}
			step("flush", "FLUSH\r\n", "+OK\r\n", 0)
			// The refusal added nothing to v: m is new to it.
			step("the refused member again", "PFADD v m\r\n", ":1\r\n", 1)
			step("and again", "PFADD v m\r\n", ":0\r\n", 0)
			step("counted once", "PFCOUNT v\r\n", ":1\r\n", 0)
			step("flush", "FLUSH\r\n", "+OK\r\n", 0)

			for i, want := range []string{":1\r\n", ":0\r\n", ":0\r\n"} {
				step(fmt.Sprintf("a windowed key's member, time %d", i+1), "PFADD w:1 m\r\n", want, 1)
				step("flush", "FLUSH\r\n", "+OK\r\n", 0)
			}
		})
	}
}

// heldMembersStore is emptyStore with no stored members, so PFCOUNT
// counts the members this daemon holds pending.
type heldMembersStore struct{ emptyStore }

func (heldMembersStore) ReadMembers(_ context.Context, _ change.Kind, keys []string) ([][]byte, error) {
	return make([][]byte, len(keys)), nil
}

// refusingJournal is a counting journal that fails each append with
// refuse's error while one is set, as a full journal or disk does.
type refusingJournal struct {
	*countingJournal
	refuse atomic.Pointer[error]
}

func (j *refusingJournal) AppendRecord(rec []byte, n int) (journal.Position, error) {
	if err := j.refuse.Load(); err != nil {
		return journal.Position{}, *err
	}
	return j.countingJournal.AppendRecord(rec, n)
}

// A PFADD refused by the journal (full: -BUSY; the disk full: -ERR) adds
// nothing to its key, so the same member sent again is new to the key:
// it answers 1, as documented, and is counted once. Before, the refused
// PFADD had put the member in the reply view and the next one answered 0.
// Both forms (one member, several), and in each I/O mode.
func TestPFADDAfterRefusalAnswersOne(t *testing.T) {
	t.Parallel()
	for _, mode := range ioModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			jr := &refusingJournal{countingJournal: openCounting(t)}
			buf := pending.New(heldMembersStore{}, pending.Options{Journal: jr})
			c := dialLoop(t, serveUnix(t, New(buf, Options{IO: mode})))
			refused := func(cmd string, err error, prefix string) {
				t.Helper()
				jr.refuse.Store(&err)
				defer jr.refuse.Store(nil)
				c.send(cmd)
				if line, rerr := c.r.ReadString('\n'); rerr != nil || !strings.HasPrefix(line, prefix) {
					t.Fatalf("%q while the journal refuses (%v): %q, %v; want %s...", cmd, err, line, rerr, prefix)
				}
			}
			full := fmt.Errorf("append: %w", journal.ErrFull)
			nospace := fmt.Errorf("write: %w", syscall.ENOSPC)

			refused("PFADD u m\r\n", full, "-BUSY journal full")
			refused("PFADD u m\r\n", nospace, "-ERR journal write failed")
			c.send("PFADD u m\r\nPFADD u m\r\nPFCOUNT u\r\n")
			c.expect(":1\r\n", ":0\r\n", ":1\r\n")

			refused("PFADD v a b\r\n", full, "-BUSY journal full")
			c.send("PFADD v a b\r\nPFADD v a b\r\nPFCOUNT v\r\n")
			c.expect(":1\r\n", ":0\r\n", ":2\r\n")
		})
	}
}

// A PFADD with more members than COUNTERD_MAX_PENDING_KEYS allows at
// once is refused with an error saying so, and adds nothing: before, it
// got -BUSY ("back off and retry"), which could never succeed, after
// adding the members that fit.
func TestPFADDPastPendingLimitSaysSo(t *testing.T) {
	t.Parallel()
	jr := openCounting(t)
	buf := pending.New(emptyStore{}, pending.Options{Journal: jr, MaxPendingKeys: 10})
	c := dialLoop(t, serveUnix(t, New(buf, Options{})))
	cmd := func(n int) string {
		s := fmt.Sprintf("*%d\r\n$5\r\nPFADD\r\n$1\r\nu\r\n", n+2)
		for i := range n {
			m := fmt.Sprintf("m%d", i)
			s += fmt.Sprintf("$%d\r\n%s\r\n", len(m), m)
		}
		return s
	}
	c.send(cmd(11))
	c.expect("-ERR 11 members need 11 pending keys, more than COUNTERD_MAX_PENDING_KEYS (10) allows at once: send fewer members a command (nothing was added)\r\n")
	if n := jr.appends.Load(); n != 0 {
		t.Fatalf("journal appends after the refused PFADD: %d; want 0", n)
	}
	c.send(cmd(10))
	c.expect(":1\r\n")
}

// blockedStore is emptyStore whose writes wait until open is closed.
type blockedStore struct {
	emptyStore
	open chan struct{}
}

func (b blockedStore) ApplyOnce(ctx context.Context, id store.BatchID, cs []change.Change) (store.ApplyResult, error) {
	select {
	case <-b.open:
	case <-ctx.Done():
		return store.ApplyResult{}, ctx.Err()
	}
	return b.emptyStore.ApplyOnce(ctx, id, cs)
}

// With COUNTERD_ACK=commit a PFADD is confirmed only once its round
// commits: one answered -TIMEOUT (journaled, not committed) does not let
// the next PFADD of its member go unjournaled; one that committed does.
func TestPFADDKnownOnlyOnceCommitted(t *testing.T) {
	t.Parallel()
	jr := openCounting(t)
	st := blockedStore{open: make(chan struct{})}
	buf := pending.New(st, pending.Options{Journal: jr, Interval: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = buf.Run(ctx, ctx); close(ran) }()
	t.Cleanup(func() { cancel(); <-ran })
	c := dialLoop(t, serveUnix(t, New(buf, Options{AckCommit: true, Timeout: time.Second})))
	pfadd := func() (reply string, appends int64) {
		t.Helper()
		before := jr.appends.Load()
		c.send("PFADD u m\r\n")
		line, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line, jr.appends.Load() - before
	}
	// The database does not commit: -TIMEOUT, journaled each time.
	for i := range 2 {
		if line, n := pfadd(); !strings.HasPrefix(line, "-TIMEOUT") || n != 1 {
			t.Fatalf("PFADD %d while nothing commits: %q, %d appends; want -TIMEOUT, 1 append", i+1, line, n)
		}
	}
	close(st.open)
	// Once one is answered after its commit, the next is not journaled.
	for i := 0; ; i++ {
		line, n := pfadd()
		if line == ":0\r\n" && n == 0 {
			break
		}
		if n != 1 || i == 100 {
			t.Fatalf("PFADD after the database answers, try %d: %q, %d appends", i+1, line, n)
		}
	}
}
