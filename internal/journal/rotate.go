package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"
)

// Rotate starts the next segment; the daemon calls it when it swaps its
// in-memory state into a new round, and later Removes the closed segment
// once that round is committed.
//
// If nothing was appended since Open or the last Rotate it does nothing
// and returns (Current(), false, nil). Otherwise it makes the segment
// prepared by the last Seal current (creating one if there is none) and
// returns the old one's sequence number. It does no fsync itself, so the
// caller may hold its own lock around it without stalling appends on the
// disk: call Seal afterwards, outside that lock, to fsync and close the old
// segment (which satisfies every WaitDurable on it) and prepare the next.
//
// Normally a round is exactly one segment. The exception: when Append had
// to abandon a broken segment (a failed write it could not cut back off,
// or a failed fsync), the round spans every segment after the previous
// Rotate's closed up to this closed. Commit the round as closed and Remove
// each of them; Remove ignores numbers that are already gone.
func (j *Journal) Rotate() (closed uint64, rotated bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return 0, false, fmt.Errorf("rotate journal: %w", os.ErrClosed)
	}
	if j.roundRecords == 0 {
		return j.currentSeqLocked(), false, nil
	}
	old := j.cur
	if err := j.switchLocked(); err != nil {
		return 0, false, fmt.Errorf("rotate segment %d: %w", old.seq, err)
	}
	j.roundRecords = 0
	if j.mode == FsyncAlways {
		// A waiter on the old segment may have kicked the syncer just
		// before this: its fsync of the new segment says nothing of the
		// old one. Kick again, so the syncer seals the old segment even
		// if the caller never calls Seal.
		select {
		case j.kick <- struct{}{}:
		default:
		}
	}
	return old.seq, true, nil
}

// switchLocked makes segment Current()+1 current and queues the old one
// for Seal. Called with mu held and a current segment.
func (j *Journal) switchLocked() error {
	old := j.cur
	next := j.spare
	j.spare = nil
	if next == nil || next.seq != old.seq+1 {
		if next != nil {
			next.f.Close()
			os.Remove(next.path)
		}
		var err error
		if next, err = createSegment(j.dir, old.seq+1, j.generation, j.mode); err != nil {
			return err
		}
	}
	j.live[old.seq] = old.size
	j.sealing = append(j.sealing, old)
	next.current = time.Now()
	j.cur = next
	j.total.Add(next.size)
	return nil
}

// Seal fsyncs and closes the segments Rotate moved away from, and
// prepares the next spare segment, reusing a committed segment's file if
// Remove kept one. Appends continue while it works. In FsyncEverySec the
// fsync is left to the syncer's next tick, and skipped if the segment is
// Removed before it (its round is committed, so its records are not
// needed); FsyncAlways fsyncs at once for WaitDurable's callers; FsyncNo
// never does. An fsync failure is returned (and reported to WaitDurable
// callers); the segment's data still reached the kernel.
func (j *Journal) Seal() error {
	err := j.sealRotated()
	j.mu.Lock()
	// Without a current segment there is nothing to rotate from; Append
	// prepares the next one when it creates the first.
	need := !j.closed && j.spare == nil && j.cur != nil
	var next uint64
	if need {
		next = j.cur.seq + 1
	}
	j.mu.Unlock()
	if !need {
		return err
	}
	sp, serr := j.prepareSegment(next)
	if serr != nil {
		// Rotate will try again itself.
		return errors.Join(err, fmt.Errorf("prepare segment %d: %w", next, serr))
	}
	j.mu.Lock()
	if j.closed || j.spare != nil || j.cur.seq+1 != sp.seq {
		j.mu.Unlock()
		sp.f.Close()
		os.Remove(sp.path)
		return err
	}
	j.spare = sp
	j.mu.Unlock()
	return err
}

// sealRotated fsyncs and closes every segment queued by Rotate; in
// FsyncEverySec it hands them to the syncer instead (see syncUnsynced).
func (j *Journal) sealRotated() error {
	j.mu.Lock()
	segs := j.sealing
	j.sealing = nil
	if j.mode == FsyncEverySec {
		j.unsynced = append(j.unsynced, segs...)
		segs = nil
	}
	j.mu.Unlock()
	return j.syncAndClose(segs)
}

// syncUnsynced fsyncs and closes the sealed segments not yet Removed:
// the syncer's once-a-second duty in FsyncEverySec.
func (j *Journal) syncUnsynced() error {
	j.mu.Lock()
	segs := j.unsynced
	j.unsynced = nil
	j.mu.Unlock()
	return j.syncAndClose(segs)
}

// syncAndClose fsyncs (unless fsync is off) and closes segs, skipping any
// that Remove closed first.
func (j *Journal) syncAndClose(segs []*segment) error {
	var errs []error
	for _, old := range segs {
		j.syncMu.Lock()
		if old.closed {
			j.syncMu.Unlock()
			j.dur.finish(old.seq)
			continue
		}
		if j.mode != FsyncNo {
			if err := j.fsyncLocked(old, old.size); err != nil {
				errs = append(errs, err)
			}
		}
		old.closed = true
		j.syncMu.Unlock()
		// Durable up to its end, or failed (which check reports first):
		// either way no later fsync changes what it holds.
		j.dur.finish(old.seq)
		if err := old.f.Close(); err != nil {
			j.log.Warn("journal: closing rotated segment failed",
				slog.Uint64("seq", old.seq), slog.Any("error", err))
		}
	}
	return errors.Join(errs...)
}

// Remove deletes a segment that is no longer needed, normally because its
// round is committed. The current segment cannot be removed. Removing an
// unknown or already removed segment does nothing. Unless fsync is off, a
// few removed files are kept, truncated to their header, for Seal to reuse
// (see prepareSegment): a round then creates, fsyncs and unlinks no file.
func (j *Journal) Remove(seq uint64) error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return fmt.Errorf("remove segment %d: %w", seq, os.ErrClosed)
	}
	if j.cur != nil && seq == j.cur.seq {
		j.mu.Unlock()
		return fmt.Errorf("remove segment %d: it is the current segment", seq)
	}
	size, ok := j.live[seq]
	if !ok {
		j.mu.Unlock()
		return nil
	}
	delete(j.live, seq)
	j.total.Add(-size)
	j.dur.forget(seq)
	// Its round is committed: nothing waits on its fsync any more, and
	// the durable mark may move past it (everysec never seals a segment
	// Remove takes from the syncer).
	j.dur.finish(seq)
	var open *segment
	if i := slices.IndexFunc(j.unsynced, func(s *segment) bool { return s.seq == seq }); i >= 0 {
		open = j.unsynced[i]
		j.unsynced = slices.Delete(j.unsynced, i, i+1)
	}
	j.mu.Unlock()
	var f *os.File
	if open != nil {
		// Committed: its records need no fsync any more.
		j.syncMu.Lock()
		if !open.closed && open.syncErr == nil && !open.broken.Load() {
			f = open.f
		} else if !open.closed {
			open.f.Close()
		}
		open.closed = true
		j.syncMu.Unlock()
	}
	return j.poolSegment(seq, f)
}
