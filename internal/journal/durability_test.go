package journal

import (
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
)

// An fsync of a later segment does not make an earlier one durable: the
// earlier one may have been rotated away and not fsynced yet.
func TestDurabilityMovesThroughSegmentsInOrder(t *testing.T) {
	t.Parallel()
	var d durability
	d.init(Position{Seq: 1, Offset: segmentHeaderSize})
	old := Position{Seq: 1, Offset: 100}
	d.advance(Position{Seq: 2, Offset: 80})
	if done, _, _ := d.check(old); done {
		t.Fatal("segment 1 counted durable after an fsync of segment 2 alone")
	}
	d.advance(Position{Seq: 1, Offset: 100})
	if done, _, _ := d.check(old); !done {
		t.Fatal("segment 1 not durable after its own fsync")
	}
	if done, _, _ := d.check(Position{Seq: 2, Offset: 50}); done {
		t.Fatal("segment 2 durable before segment 1 was finished")
	}
	d.finish(1)
	if done, _, _ := d.check(Position{Seq: 2, Offset: 80}); !done {
		t.Fatal("segment 2's fsync not counted once segment 1 finished")
	}
	if done, _, _ := d.check(Position{Seq: 2, Offset: 81}); done {
		t.Fatal("segment 2 durable past its fsync")
	}
	if len(d.ahead) != 0 || len(d.finished) != 0 {
		t.Errorf("left over: ahead %v finished %v", d.ahead, d.finished)
	}
}

// A segment Rotate moved away from becomes durable without anyone calling
// Seal or WaitDurable after the rotation: a waiter's kick may have been
// taken by a syncer pass that ran just before it, and then nobody kicked
// again (TestFsyncAlwaysSharesFsyncs hung on this).
func TestRotateSealsWithoutAnotherKick(t *testing.T) {
	t.Parallel()
	j, _, err := Open(Options{Dir: t.TempDir(), Fsync: FsyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	pos, err := j.Append([]change.Change{{Key: "k", Kind: change.Total, Delta: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := j.Rotate(); err != nil || !ok {
		t.Fatalf("Rotate: %v, %v", ok, err)
	}
	// Generous: one fsync on a loaded machine.
	deadline := time.Now().Add(time.Minute)
	for {
		done, changed, err := j.dur.check(pos)
		if done {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
			t.Fatal("the rotated segment was never fsynced")
		}
	}
}
