package journal

import (
	"errors"
	"testing"

	"github.com/counterd/counterd/internal/change"
)

// These tests mark a segment broken by hand: a truncate or fsync that fails
// cannot be provoked on a real file system from a test.

func TestBrokenSegmentIsReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _, err := Open(Options{Dir: dir, Fsync: FsyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	item := []change.Change{{Key: "k", Kind: change.Total, Delta: 1}}
	if _, err := j.Append(item); err != nil {
		t.Fatal(err)
	}
	j.cur.broken.Store(true)
	pos, err := j.Append(item)
	if err != nil {
		t.Fatal(err)
	}
	if pos.Seq != 2 {
		t.Fatalf("Append after the segment broke went to segment %d; want 2", pos.Seq)
	}
	if err := j.WaitDurable(t.Context(), Position{Seq: 1, Offset: segmentHeaderSize + 15}); err != nil {
		t.Errorf("WaitDurable on the replaced segment: got %v; want nil", err)
	}
	// The round spans segments 1 and 2; Rotate closes the last of them.
	closed, rotated, err := j.Rotate()
	if err != nil || closed != 2 || !rotated {
		t.Fatalf("Rotate: got %d, %v, %v; want 2, true, nil", closed, rotated, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, segs, err := Open(Options{Dir: dir, Fsync: FsyncNo})
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 3 || segs[0].Records != 1 || segs[1].Records != 1 || segs[2].Records != 0 {
		t.Errorf("recovered %+v; want segments 1 and 2 with one record each and an empty 3", segs)
	}
}

func TestRoundSpanningAnEmptySegmentStillRotates(t *testing.T) {
	t.Parallel()
	j, _, err := Open(Options{Dir: t.TempDir(), Fsync: FsyncNo})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	item := []change.Change{{Key: "k", Kind: change.Total, Delta: 1}}
	if _, err := j.Append(item); err != nil {
		t.Fatal(err)
	}
	j.cur.broken.Store(true)
	j.maxBytes = 1 // the next Append replaces segment 1, then fails
	if _, err := j.Append(item); !errors.Is(err, ErrFull) {
		t.Fatalf("Append: got %v; want ErrFull", err)
	}
	if got := j.Current(); got != 2 {
		t.Fatalf("Current: got %d; want 2", got)
	}
	// Segment 2 is empty, but the round holds segment 1's record.
	closed, rotated, err := j.Rotate()
	if err != nil || closed != 2 || !rotated {
		t.Errorf("Rotate: got %d, %v, %v; want 2, true, nil", closed, rotated, err)
	}
}

func TestFailedFsyncFailsItsWaiters(t *testing.T) {
	t.Parallel()
	j, _, err := Open(Options{Dir: t.TempDir(), Fsync: FsyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	item := []change.Change{{Key: "k", Kind: change.Total, Delta: 1}}
	pos, err := j.Append(item)
	if err != nil {
		t.Fatal(err)
	}
	fsyncErr := errors.New("EIO")
	j.syncMu.Lock()
	j.cur.syncErr = fsyncErr
	j.cur.broken.Store(true)
	j.dur.fail(pos.Seq, j.cur.synced, fsyncErr)
	j.syncMu.Unlock()
	if err := j.WaitDurable(t.Context(), pos); !errors.Is(err, fsyncErr) {
		t.Errorf("WaitDurable: got %v; want the fsync error", err)
	}
	if err := j.WaitDurable(t.Context(), Position{Seq: pos.Seq, Offset: segmentHeaderSize}); err != nil {
		t.Errorf("WaitDurable before the failure: got %v; want nil", err)
	}
	next, err := j.Append(item)
	if err != nil || next.Seq != pos.Seq+1 {
		t.Fatalf("Append after the failure: got %v, %v; want segment %d", next, err, pos.Seq+1)
	}
	if err := j.WaitDurable(t.Context(), next); err != nil {
		t.Errorf("WaitDurable on the new segment: got %v; want nil", err)
	}
	if err := j.WaitDurable(t.Context(), pos); !errors.Is(err, fsyncErr) {
		t.Errorf("WaitDurable on the failed segment later: got %v; want the fsync error", err)
	}
}
