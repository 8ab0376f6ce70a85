package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hll"
	"github.com/counterd/counterd/internal/store"
)

// memberStore is a store that keeps unique members: each key's sketch
// (change.Unique) and its sketches per time bucket (change.UniqueMinute,
// Hour, Day), in postgresql-hll's storage format. The unique subtests
// skip a store that keeps none.
type memberStore interface {
	ReadMembers(ctx context.Context, k change.Kind, keys []string) ([][]byte, error)
	ReadBucketMembers(ctx context.Context, w change.Kind, keys []string, from, to int64) ([][]byte, error)
}

// uniqueKinds: members written once per round (a replay is found
// recorded and changes nothing), read back as the Go sketch of the same
// members, before and after a fold; bucket sketches unioned over a range
// of buckets, never summed.
var uniqueKinds = []subtest{
	{"Unique", func(t *testing.T, s Store) {
		ms := asMemberStore(t, s)
		id := func(seq uint64) store.BatchID { return round("u", "g", seq) }
		a1, _ := memberChanges(0, 60, func(h uint64) change.Change { return change.Member("a", h) })
		a2, _ := memberChanges(40, 100, func(h uint64) change.Change { return change.Member("a", h) })
		_, want := memberChanges(0, 100, nil)
		applyDup(t, s, id(1), false, a1...)
		applyDup(t, s, id(1), true, a1...)
		applyDup(t, s, id(2), false, a2...)
		read := func(stage string) {
			t.Helper()
			got, err := ms.ReadMembers(testContext(t), change.Unique, []string{"a", "none"})
			if err != nil {
				t.Fatal(err)
			}
			wantSketch(t, stage+": a", got[0], want)
			if got[1] != nil {
				t.Errorf("%s: sketch of a key without members: got %x; want none", stage, got[1])
			}
		}
		read("slot rows")
		fold(t, s)
		read("folded")
	}},
	{"UniqueWindows", func(t *testing.T, s Store) {
		ms := asMemberStore(t, s)
		id := func(seq uint64) store.BatchID { return round("uw", "g", seq) }
		in := func(w change.Kind, start int64) func(uint64) change.Change {
			return func(h uint64) change.Change { return change.BucketMember("p", w, start, h) }
		}
		// m0..m59 in hour t0 (and minute t0, day day0), m40..m99 in hour
		// t0+1h: in two rounds, the first replayed.
		h1, want1 := memberChanges(0, 60, in(change.Hour, t0))
		h2, want2 := memberChanges(40, 100, in(change.Hour, t0+3600))
		m1, _ := memberChanges(0, 60, in(change.Minute, t0))
		d1, _ := memberChanges(0, 60, in(change.Day, day0))
		d2, _ := memberChanges(40, 100, in(change.Day, day0))
		_, union := memberChanges(0, 100, nil)
		first := append(append(append(h1, m1...), d1...), change.Member("p", 1))
		applyDup(t, s, id(1), false, first...)
		applyDup(t, s, id(1), true, first...)
		applyDup(t, s, id(2), false, append(h2, d2...)...)
		read := func(stage string, w change.Kind, from, to int64, want *hll.Sketch) {
			t.Helper()
			got, err := ms.ReadBucketMembers(testContext(t), w, []string{"p", "none"}, from, to)
			if err != nil {
				t.Fatal(err)
			}
			wantSketch(t, fmt.Sprintf("%s: p %v %d..%d", stage, w, from, to), got[0], want)
			if got[1] != nil {
				t.Errorf("%s: bucket sketch of a key without members: got %x; want none", stage, got[1])
			}
		}
		for _, stage := range []string{"slot rows", "folded"} {
			read(stage, change.Hour, t0, t0+3600, union) // a member in both buckets counts once
			read(stage, change.Hour, t0, t0, want1)
			read(stage, change.Hour, t0+3600, t0+7200, want2)
			read(stage, change.Minute, t0, t0+3600, want1) // widths are separate
			read(stage, change.Day, day0, day0, union)
			read(stage, change.Hour, t0+7200, t0+7200, nil)
			fold(t, s)
		}
		// The key's own sketch holds only its plain member.
		got, err := ms.ReadMembers(testContext(t), change.Unique, []string{"p"})
		if err != nil {
			t.Fatal(err)
		}
		one := hll.NewDefault()
		one.Add(1)
		wantSketch(t, "p's own sketch", got[0], one)
	}},
}

func asMemberStore(t *testing.T, s Store) memberStore {
	t.Helper()
	ms, ok := s.(memberStore)
	if !ok {
		t.Skip("the store keeps no unique members")
	}
	return ms
}

// memberChanges returns the changes of = of(hash) for members m<from>
// through m<to-1> (nil of: none), and the Go sketch of those members.
func memberChanges(from, to int, of func(h uint64) change.Change) ([]change.Change, *hll.Sketch) {
	sk := hll.NewDefault()
	var cs []change.Change
	for i := from; i < to; i++ {
		h := hll.Hash(fmt.Appendf(nil, "m%d", i))
		sk.Add(h)
		if of != nil {
			cs = append(cs, of(h))
		}
	}
	return cs, sk
}

// wantSketch checks that got, a stored sketch, is want's bytes (nil want:
// no sketch).
func wantSketch(t *testing.T, what string, got []byte, want *hll.Sketch) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Errorf("%s: got a sketch; want none", what)
		}
		return
	}
	wb, err := want.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wb) {
		var est uint64
		sk, err := hll.Parse(got)
		if err == nil {
			est = sk.Estimate()
		}
		t.Errorf("%s: stored sketch (estimate %v, %v) differs from the Go sketch of the same members (estimate %v)", what, est, err, want.Estimate())
	}
}
