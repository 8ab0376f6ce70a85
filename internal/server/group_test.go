package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
)

func TestGroupError(t *testing.T) {
	t.Parallel()
	f := func(err error, wantPrefix string, wantRetry bool) {
		t.Helper()
		got := groupError(err)
		if !strings.HasPrefix(got, wantPrefix) {
			t.Errorf("groupError(%v): got %q; want prefix %q", err, got, wantPrefix)
		}
		if retry := !strings.Contains(got, "do not retry") && !strings.Contains(got, "will be committed"); retry != wantRetry {
			t.Errorf("groupError(%v): %q invites a retry: %v; want %v", err, got, retry, wantRetry)
		}
	}
	f(fmt.Errorf("append: %w", journal.ErrFull), "BUSY journal full", true)
	f(errors.New("write: no space left on device"), "ERR journal write failed, nothing accepted", true)
	f(fmt.Errorf("%w within 10s: deadline", errNotCommitted), "TIMEOUT increment journaled but not confirmed committed", false)
	f(fmt.Errorf("%w within 10s", errNotDurable), "TIMEOUT increment journaled but not confirmed durable within 10s; it is accepted", false)
	f(fmt.Errorf("%w: fsync failed: EIO", errNotDurable), "TIMEOUT increment journaled but not confirmed durable: fsync failed", false)
}

// An fsync that is not confirmed in time under COUNTERD_FSYNC=always comes
// after the record was appended and folded: the reply must say it is
// accepted, never "nothing accepted", or a retrying client counts twice.
// The journal's own syncer may have fsynced the record before the wait
// looks (a fast disk): then ":1" is right, and the group is tried again,
// up to 100 times, until a wait gives up first.
func TestFsyncTimeoutReplyAccepted(t *testing.T) {
	t.Parallel()
	jr, _, err := journal.Open(journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer jr.Close()
	buf := pending.New(nil, pending.Options{Journal: jr})
	s := New(buf, Options{})
	for try := 1; ; try++ {
		sess := &session{s: s}
		sess.group = append(sess.group, change.Change{Key: "post:1", Kind: change.Total, Delta: 1})
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the wait for the fsync gives up at once
		sess.endGroup(ctx)
		got := string(sess.out)
		if n := buf.PendingKeys(); n != 1 {
			t.Fatalf("pending keys: got %d; want 1 (the increment was accepted)", n)
		}
		if got == ":1\r\n" { // INCR replies the amount added
			if try == 100 {
				t.Fatal("every fsync was confirmed before the wait looked; the timeout reply was never seen")
			}
			continue // durable before the wait looked: accepted, and said so
		}
		if !strings.HasPrefix(got, "-TIMEOUT increment journaled but not confirmed durable") || !strings.Contains(got, "do not retry") {
			t.Fatalf("reply: got %q; want -TIMEOUT ... accepted ... do not retry", got)
		}
		return
	}
}
