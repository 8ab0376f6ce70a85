package pending

import (
	"fmt"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
)

// MaxKeys starts a round early by the rows it will write: every new
// counter counts, but a unique set's members count once, as the one
// sketch row the round writes for them, in each shard and for each
// window bucket.
func TestMaxKeysCountsSetsNotMembers(t *testing.T) {
	t.Parallel()
	const maxKeys = 10
	kicked := func(b *Buffer) bool {
		select {
		case <-b.flusher.kick:
			return true
		default:
			return false
		}
	}
	add := func(t *testing.T, h Shard, items ...change.Change) {
		t.Helper()
		if _, err := h.AddGroup(items, make([]error, len(items))); err != nil {
			t.Fatal(err)
		}
	}
	members := func(key string, n int) []change.Change {
		var cs []change.Change
		for i := range n {
			cs = append(cs, change.Member(key, uint64(i)*0x9e3779b97f4a7c15+1))
		}
		return cs
	}
	b := New(nil, Options{Interval: time.Hour, MaxKeys: maxKeys, Shards: 2})
	// 9 sets of 50 members and more, in groups of many and of one, on one
	// shard: 9 rows. The same key's set on another shard and a bucket's
	// set make 11.
	for k := range 9 {
		add(t, b.Shard(0), members(fmt.Sprintf("u:%d", k), 50)...)
		for _, c := range members(fmt.Sprintf("u:%d", k), 5) {
			add(t, b.Shard(0), c)
		}
	}
	if kicked(b) {
		t.Fatalf("450 members of 9 keys started a round early at MaxKeys %d", maxKeys)
	}
	add(t, b.Shard(1), change.Member("u:0", 7), change.BucketMember("u:0", change.Hour, 3600, 7))
	if !kicked(b) {
		t.Fatalf("11 sets over two shards: no round started at MaxKeys %d", maxKeys)
	}
	// After a cut the count starts again; plain counters count one each.
	if _, err := b.acc.Cut(); err != nil {
		t.Fatal(err)
	}
	for k := range maxKeys - 1 {
		add(t, b.Shard(0), change.Change{Key: fmt.Sprintf("c:%d", k), Kind: change.Plain(), Delta: 1})
	}
	if kicked(b) {
		t.Fatalf("%d counters after a cut started a round at MaxKeys %d", maxKeys-1, maxKeys)
	}
	add(t, b.Shard(0), change.Change{Key: "c:last", Kind: change.Plain(), Delta: 1})
	if !kicked(b) {
		t.Fatalf("%d counters: no round started at MaxKeys %d", maxKeys, maxKeys)
	}
}

// A counter new to a shard that a group changes several times gets one
// cell: the group's first change makes it, later ones find it.
func TestGroupRepeatsNewCounter(t *testing.T) {
	t.Parallel()
	b := New(nil, Options{Interval: time.Hour})
	incr := func(k string) change.Change { return change.Change{Key: k, Kind: change.Plain(), Delta: 1} }
	items := []change.Change{change.Member("k", 1), incr("a"), change.Member("k", 1), incr("a"), change.Member("k", 2), incr("a")}
	errs := make([]error, len(items))
	if _, err := b.AddGroup(items, errs); err != nil {
		t.Fatal(err)
	}
	if got := b.PendingKeys(); got != 3 {
		t.Fatalf("pending cells: got %d; want 3", got)
	}
	r := b.acc.parts()
	if c, ok := r.get(change.ID{Key: "a", Kind: change.Plain()}); !ok || c.N != 3 {
		t.Fatalf("a: got %d (%v); want 3", c.N, ok)
	}
	if c, ok := r.get(change.Member("k", 1).Cell()); !ok || c.N != 2 {
		t.Fatalf("member 1 of k: got %d (%v); want 2", c.N, ok)
	}
}
