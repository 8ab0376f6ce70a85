package pending_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/windows"
)

// stepClock is a hand-moved clock for the accept path.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }
func (c *stepClock) read() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func mustWindows(t *testing.T, s string) *windows.Config {
	t.Helper()
	c, err := windows.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func incr(t *testing.T, b *pending.Buffer, key string, d int64) {
	t.Helper()
	if err := b.Add([]byte(key), d); err != nil {
		t.Fatal(err)
	}
}

func totalsOf(es []pending.Estimate) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Total
	}
	return out
}

// An increment lands in the bucket its accept time falls in: the last
// instant of a minute and hour in that one, the first of the next in the
// next; RANGE-style reads see them before and after a flush.
func TestBucketBoundaries(t *testing.T) {
	t.Parallel()
	clk := &stepClock{now: at("2026-03-01T10:59:59.999Z")}
	b, _ := start(t, pending.Options{Interval: time.Hour,
		Windows: mustWindows(t, "post:*=minute:2h,hour:14d,day:400d"), Clock: windows.FuncClock(clk.read)})
	ctx := context.Background()
	incr(t, b, "post:1", 1)
	incr(t, b, "view:1", 1) // no windows
	clk.set(at("2026-03-01T11:00:00Z"))
	incr(t, b, "post:1", 10)
	clk.set(at("2026-03-01T11:01:30Z"))
	incr(t, b, "post:1", 100)

	check := func(when string) {
		t.Helper()
		f := func(k change.Kind, n int, wantFrom string, want ...int64) {
			t.Helper()
			from, got, err := b.Buckets(ctx, "post:1", k, n)
			if err != nil {
				t.Fatal(err)
			}
			if from != at(wantFrom).Unix() || !slices.Equal(totalsOf(got), want) {
				t.Errorf("%s: %v x%d: from %v, %v; want from %s, %v", when, k, n, time.Unix(from, 0).UTC(), totalsOf(got), wantFrom, want)
			}
		}
		f(change.Minute, 3, "2026-03-01T10:59:00Z", 1, 10, 100)
		f(change.Hour, 2, "2026-03-01T10:00:00Z", 1, 110)
		f(change.Day, 2, "2026-02-28T00:00:00Z", 0, 111)
	}
	check("pending")
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check("committed")
	clk.set(at("2026-03-01T11:01:45Z"))
	incr(t, b, "post:1", 1000)
	from, got, err := b.Buckets(ctx, "post:1", change.Minute, 2)
	if err != nil {
		t.Fatal(err)
	}
	if from != at("2026-03-01T11:00:00Z").Unix() || !slices.Equal(totalsOf(got), []int64{10, 1100}) {
		t.Errorf("committed plus pending: %v; want [10 1100]", totalsOf(got))
	}

	// The host's clock stepped back an hour: increments go on landing in
	// the current bucket, never an older one.
	clk.set(at("2026-03-01T10:01:45Z"))
	incr(t, b, "post:1", 5)
	_, got, err = b.Buckets(ctx, "post:1", change.Minute, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(totalsOf(got), []int64{1, 10, 1105}) {
		t.Errorf("after the clock stepped back: %v; want [1 10 1105]", totalsOf(got))
	}
}

// An increment and its bucket changes are accepted or refused together: a
// bucket whose pending count would overflow refuses the increment, total
// included; a sampled increment's variance goes to its buckets too.
func TestBucketsAllOrNothing(t *testing.T) {
	t.Parallel()
	clk := &stepClock{now: at("2026-03-01T10:00:00Z")}
	b := pending.New(nil, pending.Options{Windows: mustWindows(t, "*=minute:2h"), Clock: windows.FuncClock(clk.read)})
	add := func(items ...change.Change) []error {
		t.Helper()
		errs := make([]error, len(items))
		if _, err := b.AddGroup(items, errs); err != nil {
			t.Fatal(err)
		}
		return errs
	}
	total := func(d int64) change.Change { return change.Change{Key: "k", Kind: change.Total, Delta: d} }
	add(total(math.MaxInt64))
	clk.set(at("2026-03-01T10:01:00Z"))
	add(total(-math.MaxInt64)) // total 0, minute 10:00 at MaxInt64
	clk.set(at("2026-03-01T10:00:00Z"))
	// The clock never goes back, so this lands in 10:01 and is fine.
	if errs := add(total(1)); errs[0] != nil {
		t.Fatalf("increment in the 10:01 bucket: %v", errs[0])
	}
	// Total 1, bucket 10:01 at -MaxInt64+1. A decrement of 3 would take
	// the bucket past int64 though not the total: it is refused whole,
	// total included, so the next change of the group is checked against
	// a total of 1 (and refused), not -2.
	errs := add(total(-3), total(math.MaxInt64))
	if !errors.Is(errs[0], pending.ErrOverflow) || !errors.Is(errs[1], pending.ErrOverflow) {
		t.Fatalf("errs = %v; want [overflow, overflow]", errs)
	}
	if errs := add(total(3)); errs[0] != nil {
		t.Fatalf("increment of 3: %v", errs[0])
	}
	// MULTI/EXEC: all or nothing.
	if _, err := b.AddAll([]change.Change{total(1), total(-7)}, make([]error, 2)); !errors.Is(err, pending.ErrNotAll) {
		t.Fatalf("AddAll with an overflowing bucket: %v; want ErrNotAll", err)
	}
	// So the total is 4: it takes MaxInt64-4 more, and then not 1.
	if errs := add(total(math.MaxInt64 - 4)); errs[0] != nil {
		t.Fatalf("total to MaxInt64: %v (a refused change left its total behind?)", errs[0])
	}
	if errs := add(total(1)); !errors.Is(errs[0], pending.ErrOverflow) {
		t.Fatalf("total past MaxInt64: %v; want overflow", errs[0])
	}
	if got := b.PendingKeys(); got != 3 { // total, minute 10:00, minute 10:01
		t.Errorf("pending counters = %d; want 3", got)
	}
}

// The journal records each increment's bucket changes with it, so a
// replay lands in the buckets of the accept time, whatever the clock says
// at replay.
func TestJournalRecordsBuckets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jr, _, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if err != nil {
		t.Fatal(err)
	}
	clk := &stepClock{now: at("2026-03-01T10:59:59Z")}
	b := pending.New(nil, pending.Options{Journal: jr, Windows: mustWindows(t, "post:*=hour:14d"), Clock: windows.FuncClock(clk.read)})
	items := []change.Change{{Key: "post:1", Kind: change.Total, Delta: 40, Var: 1560}}
	if _, err := b.AddGroup(items, make([]error, 1)); err != nil {
		t.Fatal(err)
	}
	if err := jr.Close(); err != nil {
		t.Fatal(err)
	}
	jr, segs, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if err != nil {
		t.Fatal(err)
	}
	defer jr.Close()
	var got []change.Change
	for _, s := range segs {
		got = append(got, s.Changes...)
	}
	want := []change.Change{
		{Key: "post:1", Kind: change.Total, Delta: 40, Var: 1560},
		{Key: "post:1", Kind: change.Hour, Bucket: at("2026-03-01T10:00:00Z").Unix(), Delta: 40, Var: 1560},
	}
	if !slices.Equal(got, want) {
		t.Errorf("journal holds %+v; want %+v", got, want)
	}
}

// TOP ranks committed counts plus this daemon's pending ones, and a
// pending decrement that drops a key out of the store's top n lets the
// next key in.
func TestTopWithPending(t *testing.T) {
	t.Parallel()
	clk := &stepClock{now: at("2026-03-01T10:30:00Z")}
	b, _ := start(t, pending.Options{Interval: time.Hour,
		Windows: mustWindows(t, "post:*=hour:14d"), Clock: windows.FuncClock(clk.read)})
	ctx := context.Background()
	incr(t, b, "post:a", 50)
	incr(t, b, "post:b", 40)
	incr(t, b, "post:c", 30)
	incr(t, b, "other:z", 1000)
	clk.set(at("2026-03-01T08:30:00Z")) // ignored: the clock never goes back
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	clk.set(at("2026-03-02T09:30:00Z")) // 23 hours later: 10:00 is the oldest of 24 buckets
	incr(t, b, "post:a", -45)           // pending: a drops to 5
	incr(t, b, "post:d", 35)            // pending only
	got, err := b.Top(ctx, "post:", change.Hour, 24, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []pending.KeyTotal{{Key: "post:b", Total: 40}, {Key: "post:d", Total: 35}}
	if !slices.Equal(got, want) {
		t.Errorf("TOP post: hour 24 2 = %v; want %v", got, want)
	}
	got, err = b.Top(ctx, "post:", change.Hour, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	want = []pending.KeyTotal{{Key: "post:d", Total: 35}, {Key: "post:a", Total: -45}}
	if !slices.Equal(got, want) {
		t.Errorf("TOP post: hour 1 10 = %v; want %v", got, want)
	}
}

func BenchmarkAddWindows(b *testing.B) {
	win, _ := windows.Parse("post:*=minute:2h,hour:14d,day:400d")
	buf := pending.New(nil, pending.Options{Windows: win})
	key := []byte("post:42")
	b.ReportAllocs()
	for b.Loop() {
		if err := buf.Add(key, 1); err != nil {
			b.Fatal(err)
		}
	}
}
