package pending

import (
	"context"
	"errors"
	"fmt"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Members: reads of a kind whose cells are a key's members (a change's
// Bucket names the member, as change.Unique's hash does) and whose store
// keeps each key's members as one opaque value (a sketch) that merges by
// union. Union is idempotent, so such a read needs no watermarks: it takes
// what this daemon holds first, then what the store has, and a round
// committed in between is in both, which is harmless, never in neither.
// It merges as every pending read does (held.added), as a read to which
// the store had committed no round.

// MemberStore is a store that keeps members: it returns each key's stored
// value of kind k (nil for a key with none).
type MemberStore interface {
	ReadMembers(ctx context.Context, k change.Kind, keys []string) ([][]byte, error)
}

// ErrNoMembers says the store keeps no members.
var ErrNoMembers = errors.New("this store keeps no unique members")

// Members returns, for each key, its stored value of kind k and the
// members (Buckets of its cells of kind k) this daemon holds in memory,
// in the accumulating round and the queued ones, in no particular order
// and possibly repeated. It scans every pending cell of a kind other than
// the plain one, under every shard's lock.
func (b *Buffer) Members(ctx context.Context, k change.Kind, keys []string) ([][]byte, [][]int64, error) {
	ms, ok := b.flusher.store.(MemberStore)
	if !ok {
		return nil, nil, ErrNoMembers
	}
	held := b.inMemoryMembers(k, keys)
	stored, err := ms.ReadMembers(ctx, k, keys)
	if err != nil {
		return nil, nil, fmt.Errorf("read stored %v of %d keys: %w", k, len(keys), err)
	}
	return stored, held, nil
}

func (b *Buffer) inMemoryMembers(k change.Kind, keys []string) [][]int64 {
	return b.scanMembers(keys, func(id change.ID) (string, bool) { return id.Key, id.Kind == k })
}

// scanMembers returns, for each key, the Buckets of the pending cells
// that match says belong to it (naming the key), from the accumulating
// round and the queued ones.
func (b *Buffer) scanMembers(keys []string, match func(id change.ID) (string, bool)) [][]int64 {
	index := make(map[string]int, len(keys))
	for i, key := range keys {
		if _, ok := index[key]; !ok {
			index[key] = i
		}
	}
	out := make([][]int64, len(keys))
	var (
		ids []store.Identity
		// unread is the watermarks of a read that took none: to the
		// merge, the store had committed no round.
		unread []store.Marks
	)
	scan := func(rid store.BatchID, cs cells) {
		h := held{id: rid, ident: identIndex(&ids, rid.Identity)}
		for id := range cs.other {
			key, ok := match(id)
			if !ok {
				continue
			}
			if i, ok := index[key]; ok && h.added(unread, store.LaneOf(id.Key)) {
				out[i] = append(out[i], id.Bucket)
			}
		}
	}
	a := b.acc
	a.lockAll()
	defer a.unlockAll()
	rounds := b.flusher.queued()
	unread = make([]store.Marks, len(rounds)+1) // at most one identity a round
	for _, r := range rounds {
		for _, cs := range r.parts {
			scan(r.id, cs)
		}
	}
	acc := store.BatchID{Identity: a.id, Seq: a.seq()}
	for _, cs := range a.parts() {
		scan(acc, cs)
	}
	for i, key := range keys { // a key asked twice gets the same members
		if j := index[key]; j != i {
			out[i] = out[j]
		}
	}
	return out
}

// BucketMemberStore is a store that keeps members per time bucket: it
// returns, for each key, the union of its stored bucket values of window
// kind w that start from from through to (nil for a key with none).
type BucketMemberStore interface {
	ReadBucketMembers(ctx context.Context, w change.Kind, keys []string, from, to int64) ([][]byte, error)
}

// BucketMembers is Members for the n buckets of window kind w (Minute,
// Hour, Day) that end with the one the accept clock is in now: for each
// key, the union of its stored bucket values and the members this daemon
// holds for those buckets (of the member kind kept per bucket of w,
// change.MembersIn). As for Members, union is idempotent, so it needs no
// watermarks.
func (b *Buffer) BucketMembers(ctx context.Context, w change.Kind, keys []string, n int) ([][]byte, [][]int64, error) {
	uk, ok := change.MembersIn(w)
	if !ok {
		return nil, nil, fmt.Errorf("read bucket members: %v is not a window kind", w)
	}
	start := uk.Spec().Start
	ms, ok := b.flusher.store.(BucketMemberStore)
	if !ok {
		return nil, nil, ErrNoMembers
	}
	from, to := bucketRange(b.Now(), w, n)
	held := b.scanMembers(keys, func(id change.ID) (string, bool) {
		if id.Kind != uk {
			return "", false
		}
		key, at, ok := start(id.Key)
		return key, ok && at >= from && at <= to
	})
	stored, err := ms.ReadBucketMembers(ctx, w, keys, from, to)
	if err != nil {
		return nil, nil, fmt.Errorf("read stored %v members of %d keys: %w", w, len(keys), err)
	}
	return stored, held, nil
}
