package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/change"
)

// ErrFull is wrapped by Append when the record would take the live
// segments past Options.MaxBytes. Nothing was written.
var ErrFull = errors.New("journal full")

// ErrInUse is wrapped by Open when another Journal holds the directory.
var ErrInUse = errors.New("journal directory is in use by another process")

// Options configures Open.
type Options struct {
	// Dir holds the journal; it is created with mode 0700 if missing.
	Dir string
	// Fsync says when appended records are fsynced.
	Fsync FsyncMode
	// MaxBytes makes Append return ErrFull once the live segments (all not
	// yet Removed, recovered ones included) would exceed it; 0 means no
	// limit. It bounds the disk a stalled database can make us use.
	MaxBytes int64
	// Logger receives warnings about repaired segments; nil discards them.
	Logger *slog.Logger
	// Metrics receives the journal's metrics; nil means a private set.
	Metrics *metrics.Set
}

// Position identifies the end of an appended record, for WaitDurable.
type Position struct {
	Seq    uint64
	Offset int64
}

// after reports whether p lies beyond q in the journal.
func (p Position) after(q Position) bool {
	return p.Seq > q.Seq || (p.Seq == q.Seq && p.Offset > q.Offset)
}

// Journal appends records to the current segment. Its methods are safe for
// concurrent use.
type Journal struct {
	dir        string
	mode       FsyncMode
	maxBytes   int64
	log        *slog.Logger
	m          journalMetrics
	instanceID string
	// idSaved says instance-id is on disk; no segment may be created
	// before it is, or a restart would commit its rounds under another id.
	idSaved    bool
	generation [generationSize]byte
	first      uint64   // the sequence number of the first segment this Journal creates
	lock       *os.File // the directory, flocked
	dirID      string

	mu           sync.Mutex
	cur          *segment         // nil until the first segment could be created
	spare        *segment         // next segment, created ahead by Seal so Rotate need not wait on disk
	sealing      []*segment       // rotated out by Rotate, not yet fsynced and closed by Seal
	unsynced     []*segment       // FsyncEverySec: sealed, still open, fsynced by the syncer unless removed first
	pool         []pooled         // committed segment files kept for reuse
	pooling      int              // pool places taken by Removes still truncating
	live         map[uint64]int64 // bytes of each recovered or rotated segment not yet removed
	roundRecords int              // records appended since the last Rotate, in any segment
	buf          []byte           // encode buffer, reused so Append does not allocate
	closed       bool
	total        atomic.Int64 // Bytes(); changed only with mu held

	// syncMu serialises fsyncs with each other and with closing a segment,
	// so the syncer never fsyncs a file Rotate has closed.
	syncMu sync.Mutex
	dur    durability
	// renames counts renames of recycled files; dirSynced (guarded by
	// syncMu) is its value before the last good directory fsync.
	renames   atomic.Uint64
	dirSynced uint64

	kick       chan struct{} // wakes the syncer in FsyncAlways
	stop       chan struct{}
	syncerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

// maxKeptBuffer stops one huge record from pinning its buffer forever.
const maxKeptBuffer = 1 << 20

// syncInterval is how often FsyncEverySec fsyncs.
const syncInterval = time.Second

// Open locks and recovers the journal in opts.Dir and starts a new segment
// for appends, numbered one past the highest recovered, under a fresh
// Generation. It returns the segments already on disk, sorted by Seq,
// empty ones included so the caller can Remove them.
//
// A damaged segment is replaced by a copy of its good records, its
// original kept in Dir/damaged: damaged records whose framing is intact
// are skipped (Segment.Skipped), a torn tail is cut off
// (Segment.Truncated). A bad header, an unknown format version or change
// kind, or a sum that overflows int64 is an error naming the file, because
// guessing would lose data. Another open Journal on the directory makes
// the error wrap ErrInUse.
//
// Dir is created 0700 when missing. An existing Dir must be owned by the
// process's user and not writable by group or others, and a symbolic link
// on the way must be that user's or root's: otherwise the error wraps a
// *privdir.Error, since whoever can write the directory can plant segments.
//
// Open succeeds on a full disk: if the new segment (or the instance-id
// file) cannot be created, Append creates it, and fails until it can;
// meanwhile Remove frees the disk.
func Open(opts Options) (*Journal, []Segment, error) {
	if opts.Dir == "" {
		return nil, nil, errors.New("open journal: no directory")
	}
	if opts.Fsync < FsyncEverySec || opts.Fsync > FsyncNo {
		return nil, nil, fmt.Errorf("open journal: unknown fsync mode %d", int(opts.Fsync))
	}
	if opts.MaxBytes < 0 {
		return nil, nil, fmt.Errorf("open journal: negative MaxBytes %d", opts.MaxBytes)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	set := opts.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	if err := prepareDir(opts.Dir); err != nil {
		return nil, nil, fmt.Errorf("open journal: %w", err)
	}
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open journal: %w", err)
	}
	j, segs, err := open(opts, lock, log, set)
	if err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("open journal %s: %w", opts.Dir, err)
	}
	return j, segs, nil
}

func open(opts Options, lock *os.File, log *slog.Logger, set *metrics.Set) (*Journal, []Segment, error) {
	id, idSaved, err := readInstanceID(opts.Dir)
	if err != nil {
		return nil, nil, err
	}
	if !idSaved {
		id = newInstanceID()
		if err := saveInstanceID(opts.Dir, id); err != nil {
			log.Warn("journal: saving the new instance id failed; the first Append will try again", slog.Any("error", err))
		} else {
			idSaved = true
		}
	}
	gen := newGeneration()
	segs, err := recoverSegments(opts.Dir, gen, log)
	if err != nil {
		return nil, nil, err
	}
	live := make(map[uint64]int64, len(segs))
	var total int64
	var damagedTails, skipped int
	next := uint64(1)
	for _, s := range segs {
		live[s.Seq] = s.Bytes
		total += s.Bytes
		if s.Truncated > 0 {
			damagedTails++
		}
		skipped += s.Skipped
		if s.Seq == math.MaxUint64 {
			return nil, nil, fmt.Errorf("segment %d is the last possible sequence number", s.Seq)
		}
		next = max(next, s.Seq+1)
	}
	j := &Journal{
		dir:        opts.Dir,
		mode:       opts.Fsync,
		maxBytes:   opts.MaxBytes,
		log:        log,
		instanceID: id,
		idSaved:    idSaved,
		generation: gen,
		first:      next,
		lock:       lock,
		dirID:      dirID(lock),
		live:       live,
	}
	j.total.Store(total)
	if err := j.createCurrentLocked(); err != nil {
		log.Warn("journal: creating the first segment failed; Append will try again", slog.Any("error", err))
	}
	j.dur.init(Position{Seq: next, Offset: segmentHeaderSize})
	j.m = newJournalMetrics(set, j)
	j.m.corruptTails.Add(damagedTails)
	j.m.skippedRecords.Add(skipped)
	if j.mode != FsyncNo {
		j.kick = make(chan struct{}, 1)
		j.stop = make(chan struct{})
		j.syncerDone = make(chan struct{})
		var every time.Duration
		if j.mode == FsyncEverySec {
			every = syncInterval
		}
		go j.runSyncer(every)
	}
	return j, segs, nil
}

// createCurrentLocked creates the first segment, saving the instance id
// first if Open could not, and prepares the next one. Called with mu held
// (or before the Journal is shared) while there is no current segment.
func (j *Journal) createCurrentLocked() error {
	if !j.idSaved {
		if err := saveInstanceID(j.dir, j.instanceID); err != nil {
			return err
		}
		j.idSaved = true
	}
	cur, err := createSegment(j.dir, j.first, j.generation, j.mode)
	if err != nil {
		return err
	}
	j.cur = cur
	j.total.Add(cur.size)
	// Prepare the next segment now, as Seal does after every rotation, so
	// the first rotation needs no new disk space: if the disk fills before
	// it, the round in the current segment can still be swapped out,
	// committed and removed, which is what frees the disk.
	if sp, err := createSegment(j.dir, cur.seq+1, j.generation, j.mode); err != nil {
		j.log.Warn("journal: preparing the next segment failed; the first rotation will try again", slog.Any("error", err))
	} else {
		j.spare = sp // not in Bytes, like every spare: it holds no records
	}
	return nil
}

// currentSeqLocked is Current with mu held.
func (j *Journal) currentSeqLocked() uint64 {
	if j.cur == nil {
		return j.first
	}
	return j.cur.seq
}

// endLocked returns where the journal ends: the end of the current
// segment, or of the header the first one will have. Called with mu held.
func (j *Journal) endLocked() Position {
	if j.cur == nil {
		return Position{Seq: j.first, Offset: segmentHeaderSize}
	}
	return Position{Seq: j.cur.seq, Offset: j.cur.size}
}

// InstanceID returns the id created the first time this directory was
// opened: 32 lowercase hex characters, stable across restarts.
func (j *Journal) InstanceID() string { return j.instanceID }

// Generation returns the id this Open made, 32 lowercase hex characters,
// written into the header of every segment this Journal creates. With the
// instance id and a sequence number it identifies a round even after the
// directory was restored from a snapshot and sequence numbers repeat.
func (j *Journal) Generation() string { return generationString(j.generation) }

// Current returns the sequence number of the segment being appended to,
// or that the first segment will have if it could not be created yet.
func (j *Journal) Current() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.currentSeqLocked()
}

// Bytes returns the size of every live segment file, headers included:
// recovered, rotated but not removed, and current.
func (j *Journal) Bytes() int64 { return j.total.Load() }

// Append writes items as one record, with one write(2), to the current
// segment and returns where the record ends. No items is a no-op that
// returns the current position. A failed write is cut back off the file,
// so no torn record ever precedes a good one. An item of an unknown kind, a
// bucket on a kind without buckets, or a variance that is negative or not
// finite is refused before anything is written. If Open could not create
// the first segment, Append tries again, and wraps the error (ENOSPC on a
// full disk) while it cannot.
func (j *Journal) Append(items []change.Change) (Position, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return Position{}, fmt.Errorf("append to journal: %w", os.ErrClosed)
	}
	buf, err := j.Encode(j.buf[:0], items)
	if cap(buf) <= maxKeptBuffer {
		j.buf = buf[:0]
	}
	if err != nil {
		return Position{}, fmt.Errorf("append to segment %d: %w", j.currentSeqLocked(), err)
	}
	return j.appendRecordLocked(buf, len(items))
}

// Encode appends the record of items to dst, as Append would write it,
// checking each item as Append does (a refused item counts as an append
// error). It takes no lock: a caller that encodes its records itself
// writes them with AppendRecord.
func (j *Journal) Encode(dst []byte, items []change.Change) ([]byte, error) {
	rec, err := appendRecord(dst, items)
	if err != nil {
		j.m.appendErrors.Inc()
		return rec, fmt.Errorf("encode journal record: %w", err)
	}
	return rec, nil
}

// AppendRecord is Append of a record Encode made of n items: only the
// write(2) runs under the journal's lock.
func (j *Journal) AppendRecord(rec []byte, n int) (Position, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.appendRecordLocked(rec, n)
}

func (j *Journal) appendRecordLocked(rec []byte, n int) (Position, error) {
	if j.closed {
		return Position{}, fmt.Errorf("append to journal: %w", os.ErrClosed)
	}
	if n == 0 {
		return j.endLocked(), nil
	}
	before := j.total.Load()
	pos, err := j.appendLocked(rec)
	if err != nil {
		j.m.appendErrors.Inc()
		return Position{}, err
	}
	j.m.appends.Inc()
	j.m.appended.Add(int(j.total.Load() - before))
	return pos, nil
}

func (j *Journal) appendLocked(buf []byte) (Position, error) {
	if j.cur == nil {
		if err := j.createCurrentLocked(); err != nil {
			return Position{}, fmt.Errorf("append: %w", err)
		}
	} else if j.cur.broken.Load() {
		old := j.cur.seq
		if err := j.switchLocked(); err != nil {
			return Position{}, fmt.Errorf("append: replace broken segment %d: %w", old, err)
		}
	}
	cur := j.cur
	size := int64(len(buf))
	if total := j.total.Load(); j.maxBytes > 0 && total+size > j.maxBytes {
		return Position{}, fmt.Errorf("append %d bytes to segment %d with %d of %d bytes in use: %w",
			size, cur.seq, total, j.maxBytes, ErrFull)
	}
	start := cur.size
	n, err := cur.f.WriteAt(buf, start)
	if err != nil {
		werr := fmt.Errorf("append to segment %d: %w", cur.seq, err)
		if terr := cur.f.Truncate(start); terr != nil {
			// The torn bytes stay until recovery cuts them off; nothing
			// may follow them, so the next Append moves to a new segment.
			cur.broken.Store(true)
			cur.size += int64(n)
			j.total.Add(int64(n))
			return Position{}, errors.Join(werr, fmt.Errorf("cut torn record off segment %d: %w", cur.seq, terr))
		}
		return Position{}, werr
	}
	cur.size += size
	cur.records++
	j.roundRecords++
	j.total.Add(size)
	return Position{Seq: cur.seq, Offset: cur.size}, nil
}

// Close stops the syncer, fsyncs the current segment unless fsync is off,
// closes it and releases the directory. Calling it again returns the
// first result.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() { j.closeErr = j.close() })
	return j.closeErr
}

func (j *Journal) close() error {
	if j.stop != nil {
		close(j.stop)
		<-j.syncerDone
	}
	var errs []error
	if err := j.sealRotated(); err != nil {
		errs = append(errs, err)
	}
	if err := j.syncUnsynced(); err != nil {
		errs = append(errs, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	j.dropPoolLocked()
	if sp := j.spare; sp != nil {
		// Never used: drop it so a stopped journal holds no extra file.
		sp.f.Close()
		os.Remove(sp.path)
		j.spare = nil
	}
	if cur := j.cur; cur != nil {
		j.syncMu.Lock()
		if j.mode != FsyncNo {
			if err := j.fsyncLocked(cur, cur.size); err != nil {
				errs = append(errs, fmt.Errorf("close journal: %w", err))
			}
		}
		cur.closed = true
		j.syncMu.Unlock()
		if err := cur.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close segment %d: %w", cur.seq, err))
		}
	}
	if err := j.lock.Close(); err != nil {
		errs = append(errs, fmt.Errorf("release journal lock: %w", err))
	}
	j.dur.close()
	return errors.Join(errs...)
}
