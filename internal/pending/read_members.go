package pending

import (
	"context"
	"errors"
	"fmt"

	"github.com/counterd/counterd/internal/change"
)

// Members: reads of a kind whose cells are a key's members (a change's
// Bucket names the member, as change.Unique's hash does) and whose store
// keeps each key's members as one opaque value (a sketch) that merges by
// union. Union is idempotent, so such a read needs no watermarks: it takes
// what this daemon holds first, then what the store has, and a round
// committed in between is in both, which is harmless, never in neither.

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
	index := make(map[string]int, len(keys))
	for i, key := range keys {
		if _, ok := index[key]; !ok {
			index[key] = i
		}
	}
	out := make([][]int64, len(keys))
	scan := func(cs cells) {
		for id := range cs.other {
			if id.Kind != k {
				continue
			}
			if i, ok := index[id.Key]; ok {
				out[i] = append(out[i], id.Bucket)
			}
		}
	}
	a := b.acc
	a.lockAll()
	defer a.unlockAll()
	for _, r := range b.flusher.queued() {
		for _, cs := range r.parts {
			scan(cs)
		}
	}
	for _, cs := range a.parts() {
		scan(cs)
	}
	for i, key := range keys { // a key asked twice gets the same members
		if j := index[key]; j != i {
			out[i] = out[j]
		}
	}
	return out
}
