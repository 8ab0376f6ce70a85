package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// Rotate closes the current segment and starts the next one; the daemon
// calls it when it swaps its in-memory state into a new round, and later
// Removes the closed segment once that round is committed.
//
// If nothing was appended since Open or the last Rotate it does nothing
// and returns (Current(), false, nil). Otherwise it fsyncs the segment (unless
// fsync is off), which also satisfies every WaitDurable on it, and returns
// its sequence number. If that fsync fails nothing rotates; the segment is
// marked broken, so a retry rotates without fsyncing it again.
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
		return j.cur.seq, false, nil
	}
	old := j.cur.seq
	if err := j.rotateLocked(); err != nil {
		return 0, false, fmt.Errorf("rotate segment %d: %w", old, err)
	}
	j.roundRecords = 0
	return old, true, nil
}

// rotateLocked makes segment Current()+1 current. The old segment is
// fsynced first, so if creating the new one fails the old one is still
// current and complete. A broken segment is abandoned even if its fsync
// fails: there is nothing better to do with it. Called with mu held.
func (j *Journal) rotateLocked() error {
	old := j.cur
	wasBroken := old.broken.Load()
	if j.mode != FsyncNo {
		j.syncMu.Lock()
		err := j.fsyncLocked(old, old.size)
		j.syncMu.Unlock()
		if err != nil && !wasBroken {
			return err
		}
	}
	next, err := createSegment(j.dir, old.seq+1, j.mode)
	if err != nil {
		return err
	}
	j.syncMu.Lock()
	old.closed = true
	j.syncMu.Unlock()
	if err := old.f.Close(); err != nil {
		// Its bytes already reached the kernel (and disk, unless fsync is
		// off), so a close error changes nothing for the caller.
		j.log.Warn("journal: closing rotated segment failed",
			slog.Uint64("seq", old.seq), slog.Any("error", err))
	}
	j.live[old.seq] = old.size
	j.cur = next
	j.total.Add(next.size)
	return nil
}

// Remove deletes a segment that is no longer needed, normally because its
// round is committed. The current segment cannot be removed. Removing an
// unknown or already removed segment does nothing.
func (j *Journal) Remove(seq uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return fmt.Errorf("remove segment %d: %w", seq, os.ErrClosed)
	}
	if seq == j.cur.seq {
		return fmt.Errorf("remove segment %d: it is the current segment", seq)
	}
	size, ok := j.live[seq]
	if !ok {
		return nil
	}
	// No directory fsync: if power loss undoes the unlink, the segment is
	// recovered again and the caller skips it as already committed.
	err := os.Remove(filepath.Join(j.dir, segmentName(seq)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove segment %d: %w", seq, err)
	}
	delete(j.live, seq)
	j.total.Add(-size)
	j.dur.forget(seq)
	return nil
}
