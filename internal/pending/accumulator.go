package pending

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/windows"
)

// ErrBackoff is returned for a change to a new counter while too many are
// pending: the client should retry later.
var ErrBackoff = errors.New("too many pending keys, back off and retry")

// ErrOverflow is returned when a counter's pending delta would overflow
// int64.
var ErrOverflow = errors.New("increment or decrement would overflow")

// Journal is what the accumulator needs of the write-ahead journal.
type Journal interface {
	Encode(dst []byte, items []change.Change) ([]byte, error)
	AppendRecord(rec []byte, n int) (journal.Position, error)
	Current() uint64
	Rotate() (closed uint64, rotated bool, err error)
	Seal() error
	Remove(seq uint64) error
	WaitDurable(ctx context.Context, pos journal.Position) error
	SyncsEachAppend() bool
}

// Accumulator coalesces accepted changes per counter until Cut, in
// shards (see shard.go).
type Accumulator struct {
	jr Journal
	id store.Identity

	// shards hold the accumulating round; shard 0 is shared by callers
	// without a shard of their own. A shard's lock orders "check,
	// journal, fold" of each group on it against Cut and against reads,
	// so every record of a segment is in that segment's round and a read
	// sees each round in exactly one place. Locks are never held across
	// a database call.
	shards []*shard
	bound  int64 // the fast path's bound on a cell's value

	nextSeq uint64       // without a journal: the seq of the accumulating round; written under every lock
	keys    atomic.Int64 // cells in every shard; read without a lock
	rows    atomic.Int64 // rows the round will write (newCell), against maxKeys

	// win, when not nil, expands each increment of a key with windows
	// into bucket changes stamped by clock (see check).
	win   *windows.Config
	clock *windows.Clock

	maxKeys    int64
	maxPending int64
	refusal    atomic.Pointer[JournalRefusal] // the standing journal refusal (refusal.go)
	kick       func()
	queue      func(*round) // hands a cut round to the flusher, under every lock
	m          *bufferMetrics
}

// seq is the sequence number the accumulating round will have, or a
// number above every round cut before it and not above its own (the
// journal may move past a broken segment before the cut, never after).
// The caller holds a shard's lock.
func (a *Accumulator) seq() uint64 {
	if a.jr != nil {
		return a.jr.Current()
	}
	return a.nextSeq
}

// Ticket says where an accepted group went: the journal position to wait
// on for fsync, and the round to wait on for commit.
type Ticket struct {
	Pos journal.Position
	Seq uint64
	// Recorded counts the changes that changed a pending delta; a group
	// whose increments were all sampled out has nothing to wait for.
	Recorded int
	// earlier are the records a group accepted in pieces left in
	// segments before Pos's, when a cut came between its pieces.
	earlier []journal.Position
}

// AddGroup accepts a group of changes in three steps, so nothing ever has
// to be undone: it checks each (errs[i] gets ErrOverflow or ErrBackoff for
// one refused, taking earlier changes of the same group into account),
// appends the accepted ones to the journal as one record, and folds them
// into their counters' pending deltas. If the journal append fails,
// nothing of the group is accepted and the error is returned (but see add
// for a group accepted in pieces). len(errs) must be len(items). Keys may
// alias a buffer the caller reuses after the call. It runs on shard 0;
// event loops use their own Shard.
func (a *Accumulator) AddGroup(items []change.Change, errs []error) (Ticket, error) {
	return a.add(a.shards[0], items, errs, false)
}

// ErrNotAll is AddAll's refusal of a whole group because some of its
// changes were refused; errs says which and why.
var ErrNotAll = errors.New("a change of the group was refused, so none was accepted")

// AddAll accepts every change of items or none, as one journal record: a
// MULTI/EXEC transaction. If AddGroup would refuse any change, nothing is
// journaled or folded, errs says which changes and why, and the error is
// ErrNotAll; a journal failure is returned as by AddGroup.
func (a *Accumulator) AddAll(items []change.Change, errs []error) (Ticket, error) {
	return a.add(nil, items, errs, true)
}

// add is AddGroup on shard s, or AddAll when all is set (always on the
// exclusive path). A group the fast path stops in is accepted in pieces,
// one journal record each (see shard.go); if the journal fails after an
// earlier piece was accepted, the error goes to the items of the failed
// piece and those after it, in errs, so the accepted ones are not retried
// by the client.
func (a *Accumulator) add(s *shard, items []change.Change, errs []error, all bool) (Ticket, error) {
	var t Ticket
	if all {
		a.lockAll()
		defer a.unlockAll()
		_, err := a.addLocked(a.shards[0], items, errs, true, true, &t)
		return t, err
	}
	for done := 0; done < len(items); {
		s.mu.Lock()
		n, err := a.addLocked(s, items[done:], errs[done:], false, false, &t)
		s.mu.Unlock()
		failed := done // the first item of the piece that failed, if one did
		if err == nil && done+n < len(items) {
			one := done + n
			a.lockAll()
			_, err = a.addLocked(a.shards[0], items[one:one+1], errs[one:one+1], true, false, &t)
			a.unlockAll()
			failed = one
			n++
		}
		if err != nil {
			if t.Recorded == 0 {
				return Ticket{}, err // nothing of the group accepted
			}
			for i := failed; i < len(items); i++ {
				errs[i] = err
			}
			return t, nil
		}
		done += n
	}
	return t, nil
}

// addLocked checks items on shard s (the fast path) or on shard 0 with
// every lock held (excl), journals the accepted ones and folds them, and
// adds what it did to t. It returns how many items it took: on the fast
// path it stops before the first one needing the exclusive path.
func (a *Accumulator) addLocked(s *shard, items []change.Change, errs []error, excl, all bool, t *Ticket) (int, error) {
	defer s.trimScratch()
	acc, accepted, refused, stop := a.check(s, items, errs, excl)
	if all && refused > 0 {
		// check only stamped tentative sums, which the next group's
		// stamp makes stale, and consolidation moved values between
		// shards without changing any sum: there is nothing to undo but
		// the keys check reserved.
		a.keys.Add(-s.reserved)
		a.m.rejected.Add(accepted)
		return stop, ErrNotAll
	}
	seq := uint64(0)
	if len(acc) > 0 && a.jr != nil {
		var err error
		if seq, err = a.journal(s, acc, accepted, t); err != nil {
			return stop, err
		}
	}
	for i, ch := range acc {
		c := s.found[i]
		switch c {
		case nil:
			// New to s, its key reserved by check, and no earlier
			// change of the group has it.
			c = a.newCell(s, ch.Cell())
		case heldEarlier:
			if c = s.cells.get(ch.Cell()); c == nil {
				panic("BUG: a group's earlier change to a new counter left no cell")
			}
		}
		if exclusive(ch.Kind) {
			s.cells.fold(c, ch)
		} else {
			// change.Fold of a change that adds up and cancels nothing.
			c.Net, _ = change.AddNet(c.Net, ch)
		}
		if excl && !c.big && a.outside(c.N) {
			a.markBig(ch.Cell(), c)
		}
	}
	if seq == 0 {
		seq = a.seq()
	}
	t.Seq = max(t.Seq, seq)
	t.Recorded += accepted
	a.m.accepted.Add(accepted)
	return stop, nil
}

// journal appends acc, the changes check accepted on s, to the journal
// as one record and notes its position in t; on failure it gives back
// what check reserved.
func (a *Accumulator) journal(s *shard, acc []change.Change, accepted int, t *Ticket) (uint64, error) {
	rec, err := s.encode(a.jr, acc)
	var pos journal.Position
	if err == nil {
		pos, err = a.jr.AppendRecord(rec, len(acc))
		a.noteAppend(err, len(rec)) // an item Encode refuses is not the journal refusing
	}
	if err != nil {
		a.keys.Add(-s.reserved)
		a.m.rejected.Add(accepted)
		return 0, err
	}
	if t.Pos.Seq != 0 && t.Pos.Seq != pos.Seq {
		// A cut came between two pieces of the group: wait on the
		// earlier segment's record too (see Buffer.WaitDurable).
		t.earlier = append(t.earlier, t.Pos)
	}
	t.Pos = pos
	return pos.Seq, nil
}

// Cut swaps the cells out into a round, rotating the journal so the
// round's records are exactly its segments, and queues it. It reports
// false when nothing was accumulating, or when the journal could not
// rotate (the next Cut tries again).
func (a *Accumulator) Cut() (bool, error) {
	a.lockAll()
	defer a.unlockAll()
	if a.keys.Load() == 0 {
		return false, nil
	}
	var seq uint64
	if a.jr != nil {
		closed, rotated, err := a.jr.Rotate()
		if err != nil {
			return false, fmt.Errorf("cannot cut a round: rotate journal: %w", err)
		}
		if !rotated {
			panic("BUG: keys pending but the journal segment is empty")
		}
		seq = closed
	} else {
		seq = a.nextSeq
		a.nextSeq++
	}
	r := &round{id: store.BatchID{Identity: a.id, Seq: seq}, parts: make(parts, len(a.shards))}
	for i, s := range a.shards {
		r.parts[i] = s.cells
		s.cells = newCells(presize(len(s.cells.totals)), presize(len(s.cells.other)))
		s.sets = make(map[change.ID]string, presize(len(s.sets)))
	}
	a.keys.Store(0)
	a.rows.Store(0)
	a.queue(r)
	return true, nil
}

// newCell adds a cell for id, new to s, and counts it towards MaxKeys,
// which starts a round early, by the rows the round will write: a
// counter's cell is a row of its own, but a member (of a kind whose Spec
// says Members, as PFADD's) is one of its set's members, all of which a
// round writes as one sketch row, so only the set's first member in s
// counts. (Counting members cut a round every MaxKeys members under
// PFADD: six times as many rounds as INCR's at the same rate, each
// rewriting every key's sketch row in PostgreSQL.) A set's members share
// one copy of its key.
func (a *Accumulator) newCell(s *shard, id change.ID) *cell {
	if id.Kind.Members() {
		set := change.ID{Key: id.Key, Kind: id.Kind}
		key, ok := s.sets[set]
		if ok {
			id.Key = key
			return s.cells.addOwned(id)
		}
		key = strings.Clone(id.Key) // it may alias the caller's buffer
		set.Key, id.Key = key, key
		s.sets[set] = key
		c := s.cells.addOwned(id)
		a.countRow()
		return c
	}
	c := s.cells.add(id)
	a.countRow()
	return c
}

// countRow counts a row the accumulating round will write.
func (a *Accumulator) countRow() {
	if a.rows.Add(1) == a.maxKeys {
		a.kick()
	}
}

// PendingKeys reports how many distinct counters wait for the next round.
func (a *Accumulator) PendingKeys() int { return int(a.keys.Load()) }

func addChecked(a, b int64) (int64, bool) { return change.CheckedAdd(a, b) }
