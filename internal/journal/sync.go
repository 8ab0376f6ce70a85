package journal

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// WaitDurable returns once the record ending at pos is fsynced, in
// FsyncAlways; in the other modes it returns nil at once. Concurrent
// waiters share fsyncs: one syncer goroutine fsyncs the current segment
// whenever a waiter asks, and each fsync covers everything written before
// it started. It gives up when ctx is done. Any error means the record
// reached the kernel but may not survive power loss.
// SyncsEachAppend reports whether WaitDurable waits for an fsync (mode
// always); in the other modes a record is as durable as promised once
// appended.
func (j *Journal) SyncsEachAppend() bool { return j.mode == FsyncAlways }

func (j *Journal) WaitDurable(ctx context.Context, pos Position) error {
	if j.mode != FsyncAlways {
		return nil
	}
	j.mu.Lock()
	end := j.endLocked()
	j.mu.Unlock()
	if pos.after(end) {
		return fmt.Errorf("wait for segment %d offset %d: past the end of the journal (segment %d offset %d)",
			pos.Seq, pos.Offset, end.Seq, end.Offset)
	}
	for {
		done, changed, err := j.dur.check(pos)
		if done {
			return err
		}
		select {
		case j.kick <- struct{}{}:
		default: // a kick is pending, and the fsync it starts will cover pos
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("wait for segment %d offset %d to be durable: %w", pos.Seq, pos.Offset, context.Cause(ctx))
		}
	}
}

// runSyncer fsyncs the current segment whenever kicked and, if every > 0,
// that often. It returns when stop is closed.
func (j *Journal) runSyncer(every time.Duration) {
	defer close(j.syncerDone)
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-j.stop:
			return
		case <-j.kick:
		case <-tick:
		}
		// Segments Rotate moved away from come first: WaitDurable callers
		// on them are waiting too.
		if err := j.sealRotated(); err != nil {
			j.log.Error("journal: sealing a rotated segment failed", slog.Any("error", err))
		}
		if j.mode == FsyncEverySec && every > 0 {
			if err := j.syncUnsynced(); err != nil {
				j.log.Error("journal: fsync of a sealed segment failed", slog.Any("error", err))
			}
		}
		if j.mode == FsyncEverySec && !j.currentOlderThan(every) {
			// A segment younger than a second will be fsynced by Seal
			// when it rotates, with no appends racing the fsync for its
			// tail page (a write to a page under writeback waits).
			continue
		}
		j.syncCurrent()
	}
}

// currentOlderThan reports whether the current segment has received
// appends for longer than d.
func (j *Journal) currentOlderThan(d time.Duration) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cur != nil && time.Since(j.cur.current) >= d
}

// syncCurrent fsyncs the current segment if it grew since its last fsync.
// mu is held only to read where the segment ends, so appends continue
// while the fsync runs.
func (j *Journal) syncCurrent() {
	j.mu.Lock()
	seg := j.cur
	if seg == nil {
		j.mu.Unlock()
		return
	}
	end := seg.size
	j.mu.Unlock()
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if seg.syncErr != nil {
		return // reported once; Append moves to a new segment
	}
	if err := j.fsyncLocked(seg, end); err != nil && j.mode == FsyncEverySec {
		// No caller waits in everysec, so this log line is the report.
		j.log.Error("journal: fsync failed; appends move to a new segment",
			slog.Uint64("seq", seg.seq), slog.Any("error", err))
	}
}

// fsyncLocked makes seg durable up to end. A failure is sticky, because
// after a failed fsync Linux may report the next one as good although the
// data is gone; the segment is marked broken so Append leaves it. Called
// with syncMu held.
func (j *Journal) fsyncLocked(seg *segment, end int64) error {
	if seg.syncErr != nil || seg.closed || end <= seg.synced {
		return seg.syncErr
	}
	start := time.Now()
	err := seg.f.Sync()
	if err == nil && seg.renamed > j.dirSynced {
		// A recycled file's new name must be durable before its records
		// count as durable; one directory fsync covers every rename so far.
		renames := j.renames.Load()
		if err = syncDir(j.dir); err == nil {
			j.dirSynced = renames
		}
	}
	j.m.fsyncSeconds.UpdateDuration(start)
	j.m.fsyncs.Inc()
	if err != nil {
		j.m.fsyncErrors.Inc()
		seg.syncErr = fmt.Errorf("fsync segment %d: %w", seg.seq, err)
		seg.broken.Store(true)
		j.dur.fail(seg.seq, seg.synced, seg.syncErr)
		return seg.syncErr
	}
	seg.synced = end
	j.dur.advance(Position{Seq: seg.seq, Offset: end})
	return nil
}

// durability tracks how far the journal is known to be on disk and wakes
// WaitDurable callers when that changes.
//
// upTo only moves through segments in order: an fsync of segment N+1
// says nothing of segment N, which Rotate may have queued for Seal
// moments before and whose own fsync may not have run yet. So an fsync
// of a later segment is kept aside (ahead) until every segment before it
// is finished (fsynced and closed by Seal, or abandoned).
type durability struct {
	mu       sync.Mutex
	upTo     Position               // every position up to here is durable...
	failed   map[uint64]syncFailure // ...except past a failed segment's last good fsync
	ahead    map[uint64]int64       // fsynced ends of segments after upTo's
	finished map[uint64]bool        // segments from upTo's on that Seal has finished
	changed  chan struct{}          // closed and replaced on every change
	closed   bool
}

type syncFailure struct {
	synced int64
	err    error
}

func (d *durability) init(upTo Position) {
	d.upTo = upTo
	d.failed = make(map[uint64]syncFailure)
	d.ahead = make(map[uint64]int64)
	d.finished = make(map[uint64]bool)
	d.changed = make(chan struct{})
}

// check says whether pos is settled: durable (nil error), or never going
// to be. If not, changed is closed when it is worth checking again.
func (d *durability) check(pos Position) (done bool, changed <-chan struct{}, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.failed[pos.Seq]; ok && pos.Offset > f.synced {
		return true, nil, f.err
	}
	if !pos.after(d.upTo) {
		return true, nil, nil
	}
	if d.closed {
		return true, nil, fmt.Errorf("wait for segment %d offset %d: %w", pos.Seq, pos.Offset, os.ErrClosed)
	}
	return false, d.changed, nil
}

// advance records that segment p.Seq is durable up to p.Offset.
func (d *durability) advance(p Position) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case p.Seq == d.upTo.Seq && p.Offset > d.upTo.Offset:
		d.upTo.Offset = p.Offset
		d.settleLocked()
		d.notifyLocked()
	case p.Seq > d.upTo.Seq && p.Offset > d.ahead[p.Seq]:
		d.ahead[p.Seq] = p.Offset
	}
}

// finish records that segment seq will get no more records and no more
// fsyncs: Seal fsynced and closed it, or gave up on it.
func (d *durability) finish(seq uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if seq < d.upTo.Seq {
		return
	}
	d.finished[seq] = true
	if d.settleLocked() {
		d.notifyLocked()
	}
}

// settleLocked moves upTo past every finished segment, into the next
// one's fsynced part, and reports whether it moved.
func (d *durability) settleLocked() bool {
	moved := false
	for d.finished[d.upTo.Seq] {
		delete(d.finished, d.upTo.Seq)
		next := d.upTo.Seq + 1
		d.upTo = Position{Seq: next, Offset: d.ahead[next]}
		delete(d.ahead, next)
		moved = true
	}
	return moved
}

func (d *durability) fail(seq uint64, synced int64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failed[seq] = syncFailure{synced: synced, err: err}
	d.notifyLocked()
}

func (d *durability) forget(seq uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.failed, seq)
}

func (d *durability) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	d.notifyLocked()
}

func (d *durability) notifyLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}
