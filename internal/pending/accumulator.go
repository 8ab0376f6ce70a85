package pending

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/slots"
)

// ErrBackoff is returned for a change to a new counter while too many are
// pending: the client should retry later.
var ErrBackoff = errors.New("too many pending keys, back off and retry")

// ErrOverflow is returned when a counter's pending delta would overflow
// int64.
var ErrOverflow = errors.New("increment or decrement would overflow")

// Journal is what the accumulator needs of the write-ahead journal.
type Journal interface {
	Append(items []change.Change) (journal.Position, error)
	Current() uint64
	Rotate() (closed uint64, rotated bool, err error)
	Seal() error
	Remove(seq uint64) error
	WaitDurable(ctx context.Context, pos journal.Position) error
	SyncsEachAppend() bool
}

// Accumulator coalesces accepted changes per counter until Cut.
type Accumulator struct {
	jr   Journal
	id   slots.Identity
	seed maphash.Seed

	// mu orders "check, journal, fold" of each group against Cut and
	// against reads of the in-memory state, so every record of a segment
	// is in that segment's round and a read sees each round in exactly
	// one place. It is never held across a database call.
	mu      sync.Mutex
	nextSeq uint64 // without a journal: the seq of the accumulating round
	shards  []shard
	keys    atomic.Int64 // distinct counters in the shards

	// Group scratch, reused under mu so AddGroup does not allocate.
	tent     map[change.ID]tentative
	accepted []change.Change

	maxKeys    int64
	maxPending int64
	kick       func()
	queue      func(*round) // hands a cut round to the flusher, under mu
	m          *bufferMetrics
}

// tentative is a counter's pending delta as a group under check would
// leave it.
type tentative struct {
	n     int64
	fresh bool // the counter is not in the shards yet
}

type shard struct {
	mu sync.Mutex
	// Values are pointers so that adding to an existing counter is a
	// lookup, which does not allocate, rather than an assignment, which
	// copies the key.
	m map[change.ID]*cell
	_ [40]byte // keep neighbouring shard locks off one cache line
}

func (a *Accumulator) shardOf(key string) int {
	return int(maphash.String(a.seed, key) % uint64(len(a.shards)))
}

func (a *Accumulator) newMaps() []map[change.ID]*cell {
	ms := make([]map[change.ID]*cell, len(a.shards))
	for i := range ms {
		ms[i] = make(map[change.ID]*cell)
	}
	return ms
}

// seq is the sequence number the accumulating round will have, or a
// number above every round cut before it and not above its own (the
// journal may move past a broken segment before the cut, never after).
// The caller holds mu.
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
}

// AddGroup accepts a group of changes in three steps, so nothing ever has
// to be undone: it checks each (errs[i] gets ErrOverflow or ErrBackoff for
// one refused, taking earlier changes of the same group into account),
// appends the accepted ones to the journal as one record, and folds them
// into their counters' pending deltas. If the journal append fails,
// nothing of the group is accepted and the error is returned. len(errs)
// must be len(items). Keys may alias a buffer the caller reuses after the
// call.
func (a *Accumulator) AddGroup(items []change.Change, errs []error) (Ticket, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	acc := a.check(items, errs)
	var t Ticket
	if len(acc) > 0 && a.jr != nil {
		pos, err := a.jr.Append(acc)
		if err != nil {
			a.m.rejected.Add(len(acc))
			return t, err
		}
		t.Pos = pos
	}
	for _, c := range acc {
		a.fold(c)
	}
	t.Seq = a.seq()
	t.Recorded = len(acc)
	a.m.accepted.Add(len(acc))
	return t, nil
}

// check returns the changes of items that may be accepted. The caller
// holds mu, so nothing else changes the shards until it folds them.
func (a *Accumulator) check(items []change.Change, errs []error) []change.Change {
	acc := a.accepted[:0]
	defer clear(a.tent) // its keys alias the caller's buffer
	group := len(items) > 1
	newKeys := int64(0)
	for i, c := range items {
		errs[i] = nil
		if c.Delta == 0 && c.Var == 0 {
			continue // sampled out, or INCRBY 0: nothing to record
		}
		id := c.ID()
		t, seen := a.tent[id]
		if !seen {
			t.n, t.fresh = a.peek(id)
			if t.fresh && a.keys.Load()+newKeys >= a.maxPending {
				a.m.rejected.Inc()
				errs[i] = ErrBackoff
				continue
			}
		}
		sum, ok := addChecked(t.n, c.Delta)
		if !ok {
			a.m.rejected.Inc()
			errs[i] = ErrOverflow
			continue
		}
		if t.fresh && !seen {
			newKeys++
		}
		if group {
			a.tent[id] = tentative{n: sum, fresh: t.fresh}
		}
		acc = append(acc, c)
	}
	a.accepted = acc[:0]
	return acc
}

// peek returns id's pending delta and whether it has none yet.
func (a *Accumulator) peek(id change.ID) (int64, bool) {
	s := &a.shards[a.shardOf(id.Key)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.m[id]; c != nil {
		return c.n, false
	}
	return 0, true
}

// fold adds a checked change to its counter. The caller holds mu.
func (a *Accumulator) fold(ch change.Change) {
	id := ch.ID()
	s := &a.shards[a.shardOf(id.Key)]
	s.mu.Lock()
	c := s.m[id]
	if c == nil {
		c = &cell{}
		id.Key = strings.Clone(id.Key) // the caller's buffer is reused
		s.m[id] = c
		if a.keys.Add(1) == a.maxKeys {
			a.kick()
		}
	}
	c.n += ch.Delta
	c.v += ch.Var
	s.mu.Unlock()
}

// Cut swaps the shards out into a round, rotating the journal so the
// round's records are exactly its segments, and queues it. It reports
// false when nothing was accumulating, or when the journal could not
// rotate (the next Cut tries again).
func (a *Accumulator) Cut() (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.keys.Load() == 0 {
		return false, nil
	}
	var seq uint64
	if a.jr != nil {
		closed, rotated, err := a.jr.Rotate()
		if err != nil {
			return false, fmt.Errorf("rotate journal: %w", err)
		}
		if !rotated {
			panic("BUG: keys pending but the journal segment is empty")
		}
		seq = closed
	} else {
		seq = a.nextSeq
		a.nextSeq++
	}
	r := &round{id: slots.BatchID{Identity: a.id, Seq: seq}, shards: make([]map[change.ID]*cell, len(a.shards))}
	for i := range a.shards {
		s := &a.shards[i]
		s.mu.Lock()
		r.shards[i] = s.m
		s.m = make(map[change.ID]*cell, len(r.shards[i]))
		a.keys.Add(-int64(len(r.shards[i])))
		s.mu.Unlock()
	}
	a.queue(r)
	return true, nil
}

// PendingKeys reports how many distinct counters wait for the next round.
func (a *Accumulator) PendingKeys() int { return int(a.keys.Load()) }

func addChecked(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}
