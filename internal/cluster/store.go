package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Part is what the cluster needs of one partition's store: the
// PostgreSQL store (internal/slots) over the partition's database.
type Part interface {
	store.Store
	ReadMembers(ctx context.Context, k change.Kind, keys []string) ([][]byte, error)
	ReadBucketMembers(ctx context.Context, w change.Kind, keys []string, from, to int64) ([][]byte, error)
	SetMembers(ctx context.Context, key string, after []byte, n int) ([][]byte, error)
}

// Store is a store.Store over a cluster's partitions: every change and
// read of a key goes to the key's partition (Partition), whose own store
// keeps its rows and its lanes' watermarks. A round is split per
// partition and the parts are written at once, each in its partition's
// own transactions, exactly once per partition and lane: a round applied
// again after some partitions committed their part writes exactly the
// parts that are missing. No transaction spans partitions.
//
// A partition that fails holds back only its own keys. The store
// remembers, per partition, the first round whose part failed there (its
// blocker) and, per round not yet written everywhere, which partitions
// have its part. A later round skips a partition that has a blocker (so
// each partition's rounds commit in order, as its lanes' watermarks
// require) and is written everywhere else; ApplyOnce then wraps
// store.ErrPartial, and applying the round again writes only the missing
// parts. A restart forgets all this and replays the journal in order.
type Store struct {
	parts []Part

	mu      sync.Mutex
	blocker []*store.BatchID         // by partition: the first round not written there
	wrote   map[store.BatchID]uint64 // partitions (bits) of partly written rounds that have their part
}

// New returns the store over parts, in partition order; their count must
// be a power of two, as PL/Proxy's.
func New(parts []Part) (*Store, error) {
	if n := len(parts); n == 0 || bits.OnesCount(uint(n)) != 1 {
		return nil, fmt.Errorf("a cluster has a power of two partitions, not %d", n)
	}
	if len(parts) > 64 {
		return nil, fmt.Errorf("a cluster has at most 64 partitions here, not %d", len(parts))
	}
	return &Store{parts: parts, blocker: make([]*store.BatchID, len(parts)), wrote: map[store.BatchID]uint64{}}, nil
}

// Parts returns how many partitions the cluster has.
func (s *Store) Parts() int { return len(s.parts) }

// PartError is a round or read that failed on some partitions.
type PartError struct {
	// Failed holds each failed partition's error, by partition.
	Failed map[int]error
}

func (e *PartError) Error() string {
	ps := make([]int, 0, len(e.Failed))
	for p := range e.Failed {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = fmt.Sprintf("partition %d: %v", p, e.Failed[p])
	}
	return strings.Join(msgs, "; ")
}

// failed returns partition p's error, if it failed; e may be nil.
func (e *PartError) failed(p int) (error, bool) {
	if e == nil {
		return nil, false
	}
	err, ok := e.Failed[p]
	return err, ok
}

// Unwrap lets errors.Is see every partition's error (store.ErrFenced).
func (e *PartError) Unwrap() []error {
	out := make([]error, 0, len(e.Failed))
	for _, err := range e.Failed {
		out = append(out, err)
	}
	return out
}

// each runs fn for every partition in ps at once and collects errors.
func each(ps []int, fn func(p int) error) error {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		failed map[int]error
	)
	for _, p := range ps {
		wg.Go(func() {
			if err := fn(p); err != nil {
				mu.Lock()
				if failed == nil {
					failed = make(map[int]error)
				}
				failed[p] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != nil {
		return &PartError{Failed: failed}
	}
	return nil
}

// all is every partition.
func (s *Store) all() []int {
	ps := make([]int, len(s.parts))
	for i := range ps {
		ps[i] = i
	}
	return ps
}

// ApplyOnce writes each partition's part of the batch, in the batch's
// order, on every partition at once. Every partition is written, with an
// empty part if none of the batch's keys is its, so every partition's
// lanes record the round (a read of no key sees one set of watermarks),
// except partitions that already have this round's part or are behind on
// an earlier round. The round is a duplicate when every partition had
// it.
func (s *Store) ApplyOnce(ctx context.Context, id store.BatchID, batch []change.Change) (store.ApplyResult, error) {
	split := make([][]change.Change, len(s.parts))
	for _, c := range batch {
		p := s.partOf(c.CounterKey())
		split[p] = append(split[p], c)
	}
	todo, skipped := s.plan(id, split)
	results := make([]store.ApplyResult, len(s.parts))
	err := each(todo, func(p int) error {
		var err error
		results[p], err = s.parts[p].ApplyOnce(ctx, id, split[p])
		return err
	})
	s.record(id, todo, skipped, split, err)
	out := store.ApplyResult{Duplicate: len(todo) > 0}
	for _, p := range todo {
		r := results[p]
		out.Updated += r.Updated
		out.Inserted += r.Inserted
		out.Attempts += r.Attempts
		out.Duplicate = out.Duplicate && r.Duplicate
		for id, o := range r.Outcomes {
			if out.Outcomes == nil {
				out.Outcomes = make(map[string]int64, len(r.Outcomes))
			}
			out.Outcomes[id] = o
		}
	}
	if err == nil && len(skipped) > 0 {
		failed := make(map[int]error, len(skipped))
		for _, p := range skipped {
			failed[p] = fmt.Errorf("behind on round %d of %s", s.blockerOf(p).Seq, s.blockerOf(p).Instance)
		}
		err = &PartError{Failed: failed}
	}
	if err != nil {
		if errors.Is(err, store.ErrFenced) || len(todo) == 0 && len(skipped) == 0 {
			return out, err
		}
		return out, fmt.Errorf("%w: %w", store.ErrPartial, err)
	}
	return out, nil
}

// plan returns the partitions round id is to be written on now, and
// those skipped because they are behind on another round. A partition
// behind with nothing of this round's is neither: it has nothing to wait
// for.
func (s *Store) plan(id store.BatchID, split [][]change.Change) (todo, skipped []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	have := s.wrote[id]
	for p := range s.parts {
		switch b := s.blocker[p]; {
		case have&(1<<p) != 0:
			// already written there
		case b != nil && *b != id && len(split[p]) == 0:
			// nothing to write, and nothing to keep in order
		case b != nil && *b != id:
			skipped = append(skipped, p)
		default:
			todo = append(todo, p)
		}
	}
	return todo, skipped
}

// record notes which partitions of todo now have round id's part; a
// partition left out of todo and skipped had nothing to write.
func (s *Store) record(id store.BatchID, todo, skipped []int, split [][]change.Change, err error) {
	var pe *PartError
	errors.As(err, &pe)
	s.mu.Lock()
	defer s.mu.Unlock()
	have := s.wrote[id]
	for p := range s.parts {
		if len(split[p]) == 0 && !slices.Contains(todo, p) && !slices.Contains(skipped, p) {
			have |= 1 << p
		}
	}
	for _, p := range todo {
		if perr, failed := pe.failed(p); failed {
			// A fenced round is never written: it blocks nothing.
			if s.blocker[p] == nil && !errors.Is(perr, store.ErrFenced) {
				b := id
				s.blocker[p] = &b
			}
			continue
		}
		have |= 1 << p
		if b := s.blocker[p]; b != nil && *b == id {
			s.blocker[p] = nil
		}
	}
	if have == 1<<len(s.parts)-1 {
		delete(s.wrote, id)
	} else {
		s.wrote[id] = have
	}
}

func (s *Store) blockerOf(p int) store.BatchID {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.blocker[p]; b != nil {
		return *b
	}
	return store.BatchID{}
}

// Behind returns the partitions behind on a round, by partition: the
// round they wait on. /readyz names them.
func (s *Store) Behind() map[int]store.BatchID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]store.BatchID{}
	for p, b := range s.blocker {
		if b != nil {
			out[p] = *b
		}
	}
	return out
}

// partOf is key's partition.
func (s *Store) partOf(key string) int { return Partition(key, len(s.parts)) }

// group returns, by partition, the indexes of keys on it.
func (s *Store) group(keys []string) map[int][]int {
	g := make(map[int][]int)
	for i, k := range keys {
		p := s.partOf(k)
		g[p] = append(g[p], i)
	}
	return g
}

// Read reads each partition's keys from its own snapshot, at once: a
// key's estimate and its lane's watermarks come from one snapshot of its
// partition (Snapshot.KeyMarks). Only the partitions of keys are read,
// every partition when keys is empty; Marks holds, lane by lane, the
// lowest watermark of the partitions read: every round up to it is
// committed on each of them.
func (s *Store) Read(ctx context.Context, keys []string, ids []store.Identity) (store.Snapshot, error) {
	g := s.group(keys)
	read := slices.Sorted(maps.Keys(g))
	if len(keys) == 0 {
		read = s.all()
	}
	snaps := make([]store.Snapshot, len(s.parts))
	err := each(read, func(p int) error {
		var err error
		snaps[p], err = s.parts[p].Read(ctx, pick(keys, g[p]), ids)
		return err
	})
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("read %d keys: %w", len(keys), err)
	}
	out := store.Snapshot{Estimates: make([]store.Estimate, len(keys)), KeyMarks: make([][]store.Marks, len(keys))}
	for p, idx := range g {
		for j, i := range idx {
			out.Estimates[i] = snaps[p].Estimates[j]
			out.KeyMarks[i] = snaps[p].Marks
		}
	}
	out.Marks = lowest(pickSnaps(snaps, read), func(s store.Snapshot) []store.Marks { return s.Marks }, len(ids))
	return out, nil
}

// lowest is the lane-wise lowest of every partition's watermarks.
func lowest[T any](snaps []T, marks func(T) []store.Marks, ids int) []store.Marks {
	out := make([]store.Marks, ids)
	for i := range out {
		for l := range store.Lanes {
			for p, sn := range snaps {
				if m := marks(sn)[i][l]; p == 0 || m < out[i][l] {
					out[i][l] = m
				}
			}
		}
	}
	return out
}

// pickSnaps returns the snapshots of partitions ps.
func pickSnaps[T any](snaps []T, ps []int) []T {
	out := make([]T, len(ps))
	for j, p := range ps {
		out[j] = snaps[p]
	}
	return out
}

// pick returns keys at idx.
func pick(keys []string, idx []int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = keys[i]
	}
	return out
}

// ReadBuckets reads key's buckets on its partition; a set member's read
// (SetOp, key a change.SetMemberKey) on its set's key's partition.
func (s *Store) ReadBuckets(ctx context.Context, key string, k change.Kind, from, to int64, ids []store.Identity) (store.BucketSnapshot, error) {
	on := key
	if set, ok := change.SetOfMemberKey(key); ok && k == change.SetOp {
		on = set
	}
	return s.parts[s.partOf(on)].ReadBuckets(ctx, key, k, from, to, ids)
}

// SetMembers lists key's exact set from its partition (slots.Store's).
func (s *Store) SetMembers(ctx context.Context, key string, after []byte, n int) ([][]byte, error) {
	return s.parts[s.partOf(key)].SetMembers(ctx, key, after, n)
}

// ReadTop ranks the top n of every partition at once and keeps the n
// largest of them: a key's count is on its partition alone, so the
// cluster's top n are among the partitions' top n. Ties go by key, as
// the partitions rank them.
func (s *Store) ReadTop(ctx context.Context, prefix string, k change.Kind, since int64, n int, keys []string, ids []store.Identity) (store.TopSnapshot, error) {
	g := s.group(keys)
	snaps := make([]store.TopSnapshot, len(s.parts))
	err := each(s.all(), func(p int) error {
		var err error
		snaps[p], err = s.parts[p].ReadTop(ctx, prefix, k, since, n, pick(keys, g[p]), ids)
		return err
	})
	if err != nil {
		return store.TopSnapshot{}, fmt.Errorf("read top %q: %w", prefix, err)
	}
	out := store.TopSnapshot{Keys: make([]int64, len(keys)), KeyMarks: make([][]store.Marks, len(keys))}
	for p, idx := range g {
		for j, i := range idx {
			out.Keys[i] = snaps[p].Keys[j]
			out.KeyMarks[i] = snaps[p].Marks
		}
	}
	for _, sn := range snaps {
		out.Top = append(out.Top, sn.Top...)
	}
	slices.SortFunc(out.Top, func(a, b store.KeyTotal) int {
		if a.Total != b.Total {
			if a.Total > b.Total {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	out.Top = out.Top[:min(n, len(out.Top))]
	out.Marks = lowest(snaps, func(s store.TopSnapshot) []store.Marks { return s.Marks }, len(ids))
	return out, nil
}

// Overflows adds up every partition's.
func (s *Store) Overflows(ctx context.Context) (int64, error) {
	counts := make([]int64, len(s.parts))
	err := each(s.all(), func(p int) error {
		var err error
		counts[p], err = s.parts[p].Overflows(ctx)
		return err
	})
	var sum int64
	for _, c := range counts {
		sum += c
	}
	return sum, err
}

// ReadMembers reads each key's members on its partition.
func (s *Store) ReadMembers(ctx context.Context, k change.Kind, keys []string) ([][]byte, error) {
	return s.readPerKey(keys, func(p int, keys []string) ([][]byte, error) {
		return s.parts[p].ReadMembers(ctx, k, keys)
	})
}

// ReadBucketMembers reads each key's bucket members on its partition.
func (s *Store) ReadBucketMembers(ctx context.Context, w change.Kind, keys []string, from, to int64) ([][]byte, error) {
	return s.readPerKey(keys, func(p int, keys []string) ([][]byte, error) {
		return s.parts[p].ReadBucketMembers(ctx, w, keys, from, to)
	})
}

// readPerKey reads a value per key, each key's on its partition, the
// partitions at once.
func (s *Store) readPerKey(keys []string, read func(p int, keys []string) ([][]byte, error)) ([][]byte, error) {
	g := s.group(keys)
	out := make([][]byte, len(keys))
	err := each(s.all(), func(p int) error {
		idx := g[p]
		if len(idx) == 0 {
			return nil
		}
		got, err := read(p, pick(keys, idx))
		if err != nil {
			return err
		}
		for j, i := range idx {
			out[i] = got[j]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read members of %d keys: %w", len(keys), err)
	}
	return out, nil
}

var _ store.Store = (*Store)(nil)
