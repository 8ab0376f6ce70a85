package journal_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/journal"
)

func TestFsyncAlwaysSharesFsyncs(t *testing.T) {
	t.Parallel()
	const workers, perWorker = 32, 25
	set := metrics.NewSet()
	j, _ := openT(t, journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncAlways, Metrics: set})
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := fmt.Sprintf("post:%d", w)
			for range perWorker {
				pos, err := j.Append(items(key, 1))
				if err != nil {
					t.Error(err)
					return
				}
				if err := j.WaitDurable(ctx, pos); err != nil {
					t.Errorf("WaitDurable(%v): %v", pos, err)
					return
				}
			}
		})
	}
	// Rotations race with the waiters: a waiter on a rotated segment is
	// satisfied by Rotate's own fsync.
	stop := make(chan struct{})
	rotated := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				rotated <- n
				return
			default:
			}
			if _, ok, err := j.Rotate(); err != nil {
				t.Error(err)
			} else if ok {
				n++
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-rotated

	appends := counter(set, "counterd_journal_appends_total")
	fsyncs := counter(set, "counterd_journal_fsyncs_total")
	if appends != workers*perWorker {
		t.Errorf("appends: got %d; want %d", appends, workers*perWorker)
	}
	if fsyncs < 1 || fsyncs > appends {
		t.Errorf("fsyncs: got %d; want between 1 and %d appends", fsyncs, appends)
	}
}

func TestWaitDurableAfterRotateAndClose(t *testing.T) {
	t.Parallel()
	j, _ := openT(t, journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncAlways})
	ctx := t.Context()
	rotatedPos := appendT(t, j, "a", 1)
	rotate(t, j, 1)
	if err := j.WaitDurable(ctx, rotatedPos); err != nil {
		t.Errorf("WaitDurable on a rotated segment: got %v; want nil", err)
	}
	closedPos := appendT(t, j, "b", 1)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.WaitDurable(ctx, closedPos); err != nil {
		t.Errorf("WaitDurable after Close: got %v; want nil", err)
	}
}

func TestWaitDurablePastTheEnd(t *testing.T) {
	t.Parallel()
	j, _ := openT(t, journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncAlways})
	pos := appendT(t, j, "a", 1)
	for _, p := range []journal.Position{{Seq: pos.Seq, Offset: pos.Offset + 1}, {Seq: pos.Seq + 1, Offset: headerSize}} {
		if err := j.WaitDurable(t.Context(), p); err == nil {
			t.Errorf("WaitDurable(%v) with the journal ending at %v: got nil; want an error", p, pos)
		}
	}
}

func TestWaitDurableCanceled(t *testing.T) {
	t.Parallel()
	j, _ := openT(t, journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncAlways})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// The syncer may or may not win the race with the canceled context,
	// so either answer is right; what matters is that it returns.
	pos := appendT(t, j, "a", 1)
	if err := j.WaitDurable(ctx, pos); err != nil && ctx.Err() == nil {
		t.Errorf("WaitDurable: got %v; want nil or a context error", err)
	}
}

func TestWaitDurableOtherModesReturnAtOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []journal.FsyncMode{journal.FsyncEverySec, journal.FsyncNo} {
		set := metrics.NewSet()
		j, _ := openT(t, journal.Options{Dir: t.TempDir(), Fsync: mode, Metrics: set})
		pos := appendT(t, j, "a", 1)
		if err := j.WaitDurable(t.Context(), pos); err != nil {
			t.Errorf("%v: WaitDurable: got %v; want nil", mode, err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		want := uint64(1) // Close's fsync
		if mode == journal.FsyncNo {
			want = 0
		}
		// everysec's ticker may have fsynced first, in which case Close
		// finds nothing new; either way there is exactly one.
		if got := counter(set, "counterd_journal_fsyncs_total"); got != want {
			t.Errorf("%v: fsyncs: got %d; want %d", mode, got, want)
		}
	}
}
