package pending

import (
	"context"
	"fmt"
	"math/big"

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

// held is one round's delta for one key, as a read found it in memory.
type held struct {
	id    store.BatchID
	n     int64
	v     float64
	ident int // index of id.Identity in the read's identity list
	// set says n replaces the total (SET, DEL); expire says n is an
	// expiry in unix seconds (0: none) rather than a delta.
	set, expire bool
}

// Estimates returns each key's exact total: what the store has plus what
// this daemon holds in memory and the store does not have yet. A total
// beyond int64 is that key's Estimate.Overflow, so one such key fails no
// other; the error is for the read as a whole.
func (b *Buffer) Estimates(ctx context.Context, keys []string) ([]Estimate, error) {
	mem, ids := b.inMemory(keys)
	snap, err := b.flusher.store.Read(ctx, keys, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Estimate, len(keys))
	for i, key := range keys {
		lane := store.LaneOf(key)
		e := snap.Estimates[i]
		sum := e.Wide
		total, v, expires := e.Total, e.Var, e.Expires
		for _, h := range mem[i] {
			if h.id.Seq <= snap.Marks[h.ident][lane] {
				continue // committed after this read took it from memory
			}
			switch {
			case h.expire:
				expires = h.n * 1000
				continue
			case h.set:
				// Read your writes: a SET not committed yet replaces what
				// the store has and the deltas held before it.
				total, v, sum, expires = h.n, h.v, nil, 0
				continue
			}
			v += h.v
			if sum == nil {
				if t, ok := addChecked(total, h.n); ok {
					total = t
					continue
				}
				sum = big.NewInt(total)
			}
			sum.Add(sum, big.NewInt(h.n))
		}
		if sum != nil && !sum.IsInt64() {
			out[i] = Estimate{Expires: expires, Overflow: fmt.Errorf("total of %q is %s: %w", key, sum, store.ErrOverflow)}
			continue
		}
		if sum != nil {
			total = sum.Int64()
		}
		out[i] = Estimate{Total: total, Var: v, Expires: expires}
	}
	return out, nil
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

// inMemory returns, per key, its deltas in the accumulating round and in
// every queued round, each with its round's identity, and the distinct
// identities involved. It holds every shard's lock, so no round is
// cut meanwhile: each round is seen exactly once, in the shards or in the
// queue. It does no I/O.
func (b *Buffer) inMemory(keys []string) ([][]held, []store.Identity) {
	a := b.acc
	a.lockAll()
	defer a.unlockAll()
	rounds := b.flusher.queued()
	ids := []store.Identity{a.id}
	index := func(id store.Identity) int {
		for i, have := range ids {
			if have == id {
				return i
			}
		}
		ids = append(ids, id)
		return len(ids) - 1
	}
	acc := store.BatchID{Identity: a.id, Seq: a.seq()}
	mem := make([][]held, len(keys))
	for i, key := range keys {
		id := change.ID{Key: key, Kind: change.Total}
		exp := change.ID{Key: key, Kind: change.Expire}
		// In a round a Set comes before the expiry left in its Expire
		// cell (an earlier one was cancelled by the Set).
		add := func(r store.BatchID, ps parts, ident int) {
			if c, ok := ps.get(id); ok {
				mem[i] = append(mem[i], held{id: r, n: c.n, v: c.v, ident: ident, set: c.set})
			}
			if c, ok := ps.get(exp); ok {
				mem[i] = append(mem[i], held{id: r, n: c.n, ident: ident, expire: true})
			}
		}
		for _, r := range rounds {
			add(r.id, r.parts, index(r.id.Identity))
		}
		add(acc, a.parts(), 0)
	}
	return mem, ids
}
