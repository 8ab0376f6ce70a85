package pending_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hll"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/windows"
)

// A member added at the last instant of an hour and again at the first of
// the next, in one round, is in both hours' sketches: two cells, never
// one. BucketMembers reads the held members of the buckets asked for,
// then, once flushed, the stored sketches of exactly those buckets.
func TestBucketMembersAcrossHours(t *testing.T) {
	t.Parallel()
	clk := &stepClock{now: at("2026-03-01T10:59:59.999Z")}
	b, st := start(t, pending.Options{Interval: time.Hour,
		Windows: mustWindows(t, "u:*=hour:3h"), Clock: windows.FuncClock(clk.read)})
	ctx := context.Background()
	add := func(key string, hs ...uint64) {
		t.Helper()
		items := make([]change.Change, len(hs))
		for i, h := range hs {
			items[i] = change.Member(key, h)
		}
		errs := make([]error, len(items))
		if _, err := b.AddGroup(items, errs); err != nil {
			t.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	add("u:1", 7)
	clk.set(at("2026-03-01T11:00:00Z"))
	add("u:1", 7, 8)
	add("plain", 9) // no windows: no bucket members

	held := func(n int) []int64 {
		t.Helper()
		stored, h, err := b.BucketMembers(ctx, change.Hour, []string{"u:1", "plain"}, n)
		if err != nil {
			t.Fatal(err)
		}
		if stored[0] != nil || stored[1] != nil || len(h[1]) != 0 {
			t.Fatalf("before a flush: stored %x, held for plain %v; want none", stored, h[1])
		}
		slices.Sort(h[0])
		return h[0]
	}
	if got := held(1); !slices.Equal(got, []int64{7, 8}) {
		t.Errorf("held members of the current hour: got %v; want [7 8]", got)
	}
	if got := held(2); !slices.Equal(got, []int64{7, 7, 8}) {
		t.Errorf("held members of two hours: got %v; want [7 7 8] (7 in each hour)", got)
	}

	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f := func(from, to string, want ...uint64) {
		t.Helper()
		got, err := st.ReadBucketMembers(ctx, change.Hour, []string{"u:1"}, at(from).Unix(), at(to).Unix())
		if err != nil {
			t.Fatal(err)
		}
		sk := hll.NewDefault()
		for _, h := range want {
			sk.Add(h)
		}
		wb, _ := sk.MarshalBinary()
		if !slices.Equal(got[0], wb) {
			t.Errorf("stored hours %s..%s: got %x; want the sketch of %v", from, to, got[0], want)
		}
	}
	f("2026-03-01T10:00:00Z", "2026-03-01T10:00:00Z", 7)
	f("2026-03-01T11:00:00Z", "2026-03-01T11:00:00Z", 7, 8)
	f("2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z", 7, 8)
}
