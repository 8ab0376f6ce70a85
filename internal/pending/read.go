package pending

import (
	"context"
	"fmt"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// Estimate is a counter's total with the variance of its sampled part.
type Estimate struct {
	Total int64
	Var   float64
	// Expires is when the key expires, in unix milliseconds; 0 for none.
	Expires int64
	// Overflow, when not nil, says the total is beyond int64, so Total and
	// Var mean nothing; it wraps store.ErrOverflow and names the key and
	// its total. The key still exists (its total is not 0).
	Overflow error
}

// held is one round's net of one cell, as a read found it in memory.
type held struct {
	id    store.BatchID
	net   change.Net
	ident int // index of id.Identity in the read's identity list
}

// Estimates returns each key's exact total (the value of its cell of the
// plain kind, change.Plain, with the cells read with it, its expiry): what
// the store has plus what this daemon holds in memory and the store does
// not have yet. A total beyond int64 is that key's Estimate.Overflow, so
// one such key fails no other; the error is for the read as a whole.
func (b *Buffer) Estimates(ctx context.Context, keys []string) ([]Estimate, error) {
	mem, ids := b.inMemory(change.Plain(), keys)
	snap, err := b.flusher.store.Read(ctx, keys, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Estimate, len(keys))
	for i, key := range keys {
		e := snap.Estimates[i]
		r := change.Reading{N: e.Total, Wide: e.Wide, V: e.Var, Expires: e.Expires}
		out[i] = estimate(key, foldHeld(r, mem[i], snap.MarksOf(i), store.LaneOf(key)))
	}
	return out, nil
}

// Value returns key's value of kind k, a kind without buckets: its cell
// as the store has it (Store.ReadBuckets at bucket 0) with what this
// daemon holds and the store does not have yet folded in by the kind's
// read rule (change.Spec.Read).
func (b *Buffer) Value(ctx context.Context, k change.Kind, key string) (Estimate, error) {
	mem, ids := b.inMemory(k, []string{key})
	snap, err := b.flusher.store.ReadBuckets(ctx, key, k, 0, 0, ids)
	if err != nil {
		return Estimate{}, err
	}
	var r change.Reading
	for _, v := range snap.Buckets {
		r.N, r.V = v.Total, v.Var
	}
	return estimate(key, foldHeld(r, mem[0], snap.Marks, store.LaneOf(key))), nil
}

// added is the exactly-once merge of every pending read (Estimates,
// Value, Buckets, Top, Members, BucketMembers): a held round's change is
// added to what the store returned only if the round is above its lane's
// watermark as the store's read saw it (marks, one per identity of the
// read; lane, the key's). At or below it, the round committed after the
// read took it from memory, and the store's value has it already.
func (h held) added(marks []store.Marks, lane int) bool {
	return h.id.Seq > marks[h.ident][lane]
}

// foldHeld folds into r, oldest first, the nets a read found in memory
// that the store had not committed when it read (marks, of the key's
// lane).
func foldHeld(r change.Reading, hs []held, marks []store.Marks, lane int) change.Reading {
	for _, h := range hs {
		if h.added(marks, lane) {
			r.Fold(h.net)
		}
	}
	return r
}

// estimate is the Estimate of key's reading r.
func estimate(key string, r change.Reading) Estimate {
	if r.Wide != nil {
		if !r.Wide.IsInt64() {
			return Estimate{Expires: r.Expires, Overflow: fmt.Errorf("total of %q is %s: %w", key, r.Wide, store.ErrOverflow)}
		}
		r.N = r.Wide.Int64()
	}
	return Estimate{Total: r.N, Var: r.V, Expires: r.Expires}
}

// Get returns each key's exact total, as Estimates does; a total beyond
// int64 fails the call.
func (b *Buffer) Get(ctx context.Context, keys []string) ([]int64, error) {
	est, err := b.Estimates(ctx, keys)
	if err != nil {
		return nil, err
	}
	totals := make([]int64, len(est))
	for i, e := range est {
		if e.Overflow != nil {
			return nil, e.Overflow
		}
		totals[i] = e.Total
	}
	return totals, nil
}

// inMemory returns, per key, the nets of its cells a read of kind k takes
// in (change.Reads) in the accumulating round and in every queued round,
// each with its round's identity, and the distinct identities involved.
// They are in round order, and within a round in the order Reads gives
// (a SET on the key's total comes before the expiry left in its Expire
// cell, an earlier one having been cancelled by the SET). It holds every
// shard's lock, so no round is cut meanwhile: each round is seen exactly
// once, in the shards or in the queue. It does no I/O.
func (b *Buffer) inMemory(k change.Kind, keys []string) ([][]held, []store.Identity) {
	a := b.acc
	a.lockAll()
	defer a.unlockAll()
	rounds := b.flusher.queued()
	ids := []store.Identity{a.id}
	acc := store.BatchID{Identity: a.id, Seq: a.seq()}
	kinds := change.Reads(k)
	mem := make([][]held, len(keys))
	for i, key := range keys {
		add := func(r store.BatchID, ps parts, ident int) {
			for _, k := range kinds {
				if c, ok := ps.get(change.ID{Key: key, Kind: k}); ok {
					mem[i] = append(mem[i], held{id: r, net: c.Net, ident: ident})
				}
			}
		}
		for _, r := range rounds {
			add(r.id, r.parts, identIndex(&ids, r.id.Identity))
		}
		add(acc, a.parts(), 0)
	}
	return mem, ids
}
