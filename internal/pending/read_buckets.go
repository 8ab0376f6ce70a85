package pending

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Buckets returns key's count in each of the n buckets of kind k that end
// with the one the accept clock is in now, oldest first: what the store
// has plus what this daemon holds and the store does not have yet, as
// Estimates does for totals. It returns the start of the oldest bucket.
func (b *Buffer) Buckets(ctx context.Context, key string, k change.Kind, n int) (int64, []Estimate, error) {
	bs := b.flusher.store
	width := int64(k.Width() / time.Second)
	from, to := bucketRange(b.Now(), k, n)
	mem, ids := b.inMemoryBuckets(key, k, from, n)
	snap, err := bs.ReadBuckets(ctx, key, k, from, to, ids)
	if err != nil {
		return 0, nil, err
	}
	lane := store.LaneOf(key)
	sums := make([]*big.Int, n)
	out := make([]Estimate, n)
	for _, v := range snap.Buckets {
		i := (v.Start - from) / width
		sums[i] = big.NewInt(v.Total)
		out[i].Var += v.Var
	}
	for i, hs := range mem {
		for _, h := range hs {
			if !h.added(snap.Marks, lane) {
				continue
			}
			if sums[i] == nil {
				sums[i] = new(big.Int)
			}
			sums[i].Add(sums[i], big.NewInt(h.net.N))
			out[i].Var += h.net.V
		}
	}
	for i, s := range sums {
		if s == nil {
			continue
		}
		if !s.IsInt64() {
			return 0, nil, fmt.Errorf("bucket %d of %q is %s: %w", from+int64(i)*width, key, s, store.ErrOverflow)
		}
		out[i].Total = s.Int64()
	}
	return from, out, nil
}

// bucketRange is the first and last start of the n buckets of kind k that
// end with the one now is in.
func bucketRange(now time.Time, k change.Kind, n int) (from, to int64) {
	width := int64(k.Width() / time.Second)
	to = now.Unix() - now.Unix()%width
	return to - int64(n-1)*width, to
}

// inMemoryBuckets is inMemory for n buckets of one key, from from.
func (b *Buffer) inMemoryBuckets(key string, k change.Kind, from int64, n int) ([][]held, []store.Identity) {
	width := int64(k.Width() / time.Second)
	a := b.acc
	a.lockAll()
	defer a.unlockAll()
	rounds := b.flusher.queued()
	ids := []store.Identity{a.id}
	acc := store.BatchID{Identity: a.id, Seq: a.seq()}
	mem := make([][]held, n)
	each := func(fn func(r store.BatchID, cs cells)) {
		for _, r := range rounds {
			for _, cs := range r.parts {
				fn(r.id, cs)
			}
		}
		for _, cs := range a.parts() {
			fn(acc, cs)
		}
	}
	each(func(rid store.BatchID, cs cells) {
		if len(cs.other) == 0 {
			return
		}
		ident := identIndex(&ids, rid.Identity)
		for i := range n {
			id := change.ID{Key: key, Kind: k, Bucket: from + int64(i)*width}
			if c := cs.other[id]; c != nil {
				mem[i] = append(mem[i], held{id: rid, net: c.Net, ident: ident})
			}
		}
	})
	return mem, ids
}

func identIndex(ids *[]store.Identity, id store.Identity) int {
	for i, have := range *ids {
		if have == id {
			return i
		}
	}
	*ids = append(*ids, id)
	return len(*ids) - 1
}

// KeyTotal is a key's count over a range of buckets.
type KeyTotal = store.KeyTotal

// Top returns the n keys starting with prefix with the largest count over
// the last buckets buckets of kind k (the current one and those before
// it), largest first, ties by key: committed counts plus what this daemon
// holds. Keys whose count is 0 are left out, as counter_trending does. The store ranks n plus as many keys as this daemon holds pending
// changes for, so a pending decrement that drops a key out of the store's
// top n cannot leave a gap.
func (b *Buffer) Top(ctx context.Context, prefix string, k change.Kind, buckets, n int) ([]KeyTotal, error) {
	bs := b.flusher.store
	from, _ := bucketRange(b.Now(), k, buckets)
	mem, keys, ids := b.inMemoryTop(prefix, k, from)
	snap, err := bs.ReadTop(ctx, prefix, k, from, n+len(keys), keys, ids)
	if err != nil {
		return nil, err
	}
	sums := map[string]*big.Int{}
	for _, t := range snap.Top {
		sums[t.Key] = big.NewInt(t.Total)
	}
	for i, key := range keys {
		s := big.NewInt(snap.Keys[i])
		lane, marks := store.LaneOf(key), snap.MarksOf(i)
		for _, h := range mem[i] {
			if h.added(marks, lane) {
				s.Add(s, big.NewInt(h.net.N))
			}
		}
		sums[key] = s
	}
	out := make([]KeyTotal, 0, len(sums))
	for key, s := range sums {
		if s.Sign() == 0 {
			continue // as counter_trending: a round netting to 0 writes nothing
		}
		if !s.IsInt64() {
			return nil, fmt.Errorf("count of %q is %s: %w", key, s, store.ErrOverflow)
		}
		out = append(out, KeyTotal{Key: key, Total: s.Int64()})
	}
	slices.SortFunc(out, func(x, y KeyTotal) int {
		if x.Total != y.Total {
			if x.Total > y.Total {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Key, y.Key)
	})
	return out[:min(n, len(out))], nil
}

// inMemoryTop returns the keys starting with prefix that have pending
// changes to buckets of kind k from from on, with those changes per key.
// It scans every pending bucket counter under every shard's lock, so
// its cost follows the pending bucket counters (at most
// COUNTERD_MAX_PENDING_KEYS).
func (b *Buffer) inMemoryTop(prefix string, k change.Kind, from int64) ([][]held, []string, []store.Identity) {
	a := b.acc
	a.lockAll()
	defer a.unlockAll()
	rounds := b.flusher.queued()
	ids := []store.Identity{a.id}
	index := map[string]int{}
	var (
		keys []string
		mem  [][]held
	)
	scan := func(rid store.BatchID, cs cells) {
		for id, c := range cs.other {
			if id.Kind != k || id.Bucket < from || !strings.HasPrefix(id.Key, prefix) {
				continue
			}
			i, ok := index[id.Key]
			if !ok {
				i = len(keys)
				index[id.Key] = i
				keys = append(keys, id.Key)
				mem = append(mem, nil)
			}
			mem[i] = append(mem[i], held{id: rid, net: c.Net, ident: identIndex(&ids, rid.Identity)})
		}
	}
	for _, r := range rounds {
		for _, cs := range r.parts {
			scan(r.id, cs)
		}
	}
	for _, cs := range a.parts() {
		scan(store.BatchID{Identity: a.id, Seq: a.seq()}, cs)
	}
	return mem, keys, ids
}
