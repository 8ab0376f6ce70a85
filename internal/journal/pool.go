package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// poolCap bounds the committed segment files kept for reuse. A round is
// normally one segment and the flusher commits rounds in order, so two
// would do; the rest absorb a burst of rounds committed at once. Past it,
// Remove unlinks.
const poolCap = 4

// pooled is a committed segment file kept for reuse, renamed from
// segmentName(seq) to freeName(seq) so recovery never sees it as a
// segment (Open deletes such files). It holds nothing but its old header:
// Remove truncated it, so its disk space is freed as unlinking would.
type pooled struct {
	seq uint64
	f   *os.File
}

// recycles reports whether committed segments are kept for reuse. Not in
// FsyncNo: reuse is only safe across power loss because the new header is
// fsynced before the file takes its new name (see recycleSegment).
func (j *Journal) recycles() bool { return j.mode != FsyncNo }

// poolSegment truncates committed segment seq to its header and keeps it
// for reuse, or unlinks it if the pool is full or that fails. f is its
// open file, or nil if it was closed. Called without mu held.
func (j *Journal) poolSegment(seq uint64, f *os.File) error {
	path := filepath.Join(j.dir, segmentName(seq))
	unlink := func(err error) error {
		if f != nil {
			f.Close()
		}
		// No directory fsync: if power loss undoes the unlink, the segment
		// is recovered again and the caller skips it as already committed.
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return errors.Join(err, fmt.Errorf("remove segment %d: %w", seq, rerr))
		}
		return err
	}
	j.mu.Lock()
	keep := j.recycles() && !j.closed && len(j.pool)+j.pooling < poolCap
	if keep {
		j.pooling++
	}
	j.mu.Unlock()
	if !keep {
		return unlink(nil)
	}
	err := func() error {
		if f == nil {
			var err error
			if f, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
				return err
			}
		}
		// Keep the header: a crash before the rename leaves a valid
		// empty segment, which the caller Removes after a restart.
		if err := f.Truncate(segmentHeaderSize); err != nil {
			return err
		}
		// No directory fsync: power loss may undo the rename, or a
		// later one of this file (see recycleSegment); recovery copes.
		return os.Rename(path, filepath.Join(j.dir, freeName(seq)))
	}()
	j.mu.Lock()
	j.pooling--
	if err == nil && !j.closed {
		j.pool = append(j.pool, pooled{seq: seq, f: f})
		j.mu.Unlock()
		return nil
	}
	j.mu.Unlock()
	if errors.Is(err, os.ErrNotExist) {
		if f != nil {
			f.Close()
		}
		return nil
	}
	return unlink(nil)
}

// takePooled returns a pooled file, or false if there is none.
func (j *Journal) takePooled() (pooled, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := len(j.pool)
	if n == 0 {
		return pooled{}, false
	}
	p := j.pool[n-1]
	j.pool = j.pool[:n-1]
	return p, true
}

// prepareSegment makes segment seq ready for appends, from a pooled file
// if there is one, else as a new file. Called without mu held.
func (j *Journal) prepareSegment(seq uint64) (*segment, error) {
	if p, ok := j.takePooled(); ok {
		seg, err := j.recycleSegment(p, seq)
		if err == nil {
			return seg, nil
		}
		j.log.Warn("journal: reusing a committed segment file failed; creating a new one",
			"seq", seq, "from", p.seq, "error", err)
	}
	return createSegment(j.dir, seq, j.generation, j.mode)
}

// recycleSegment turns pooled file p into segment seq: its header is
// rewritten in place and fsynced, and only then is it renamed. So the
// name seq never holds anything but seq's header and seq's records: if
// power loss undoes the truncation or the header, the file still has its
// old name, and recovery drops a file whose header names a later segment
// than its name (see recoverSegment). The directory is fsynced later,
// before the first record in the segment counts as durable (fsyncLocked),
// so a round costs one fsync here rather than a file's and a directory's.
func (j *Journal) recycleSegment(p pooled, seq uint64) (*segment, error) {
	from := filepath.Join(j.dir, freeName(p.seq))
	path := filepath.Join(j.dir, segmentName(seq))
	fail := func(err error) (*segment, error) {
		p.f.Close()
		os.Remove(from)
		return nil, fmt.Errorf("recycle segment %d as %d: %w", p.seq, seq, err)
	}
	if _, err := p.f.WriteAt(segmentHeader(seq, j.generation), 0); err != nil {
		return fail(err)
	}
	if err := p.f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(from, path); err != nil {
		return fail(err)
	}
	return &segment{seq: seq, f: p.f, path: path, size: segmentHeaderSize, synced: segmentHeaderSize,
		renamed: j.renames.Add(1)}, nil
}

// dropPoolLocked closes and unlinks every pooled file, so a stopped
// journal leaves no committed segment behind. Called with mu held.
func (j *Journal) dropPoolLocked() {
	for _, p := range j.pool {
		p.f.Close()
		os.Remove(filepath.Join(j.dir, freeName(p.seq)))
	}
	j.pool = nil
}

// freeSuffix ends the name of a pooled file.
const freeSuffix = ".free"

// freeName is the name of the pooled file that was segment seq.
func freeName(seq uint64) string {
	return fmt.Sprintf("%0*d%s", segmentNameDigits, seq, freeSuffix)
}

// removeFree deletes the pooled files a previous run left behind: they
// hold only committed records or a header no segment uses yet.
func removeFree(dir string, names []string) error {
	for _, name := range names {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove left over %s: %w", name, err)
		}
	}
	return nil
}
