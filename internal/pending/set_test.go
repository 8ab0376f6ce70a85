package pending

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/windows"
)

func incr(k string, d int64) change.Change {
	return change.Change{Key: k, Kind: change.Total, Delta: d}
}
func set(k string, n int64) change.Change { return change.Change{Key: k, Kind: change.Set, Delta: n} }
func expire(k string, at int64) change.Change {
	return change.Change{Key: k, Kind: change.Expire, Delta: at}
}

// Set changes coalesce in order with increments, live and after a replay
// of the journal: set(n) then incr(d) is set(n+d), incr(d) then set(n) is
// set(n), a Set cancels an expiry accepted before it and not one after.
// Each case runs without and with windows (the accept path differs: with
// windows a DEL, a Set to 0, was once dropped as "nothing to record").
func TestSetCoalescing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   [][]change.Change // groups, in order
		want []change.Change
	}{
		{"set then incr", [][]change.Change{{set("a", 5)}, {incr("a", 2)}}, []change.Change{set("a", 7)}},
		{"incr then set", [][]change.Change{{incr("a", 2)}, {set("a", 5)}}, []change.Change{set("a", 5)}},
		{"del", [][]change.Change{{incr("a", 2)}, {set("a", 0)}}, []change.Change{set("a", 0)}},
		{"del then incr in one group", [][]change.Change{{incr("a", 9), set("a", 0), incr("a", 1)}}, []change.Change{set("a", 1)}},
		{"two sets", [][]change.Change{{set("a", 5)}, {incr("a", 1)}, {set("a", -3)}, {incr("a", 1)}}, []change.Change{set("a", -2)}},
		{"set to a sum that cancels", [][]change.Change{{set("a", 1)}, {incr("a", -1)}}, []change.Change{set("a", 0)}},
		{"other keys untouched", [][]change.Change{{incr("b", 4)}, {set("a", 5)}, {incr("b", 1)}}, []change.Change{set("a", 5), incr("b", 5)}},
		{"expire last wins", [][]change.Change{{incr("a", 1)}, {expire("a", 100)}, {expire("a", 200)}},
			[]change.Change{incr("a", 1), expire("a", 200)}},
		{"set cancels earlier expire", [][]change.Change{{expire("a", 100)}, {set("a", 3)}},
			[]change.Change{set("a", 3), expire("a", 0)}},
		{"expire after set stays", [][]change.Change{{expire("a", 100)}, {set("a", 3)}, {expire("a", 300)}},
			[]change.Change{set("a", 3), expire("a", 300)}},
		{"persist", [][]change.Change{{expire("a", 100)}, {expire("a", 0)}}, []change.Change{expire("a", 0)}},
	}
	win, err := windows.Parse("*=minute:2h")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		for _, w := range []*windows.Config{nil, win} {
			name := tc.name
			if w != nil {
				name += " with windows"
			}
			t.Run(name, func(t *testing.T) { testSetCoalescing(t, w, tc.in, tc.want) })
		}
	}
}

func testSetCoalescing(t *testing.T, win *windows.Config, in [][]change.Change, want []change.Change) {
	t.Parallel()
	jr, dir := openJournal(t)
	opts := Options{Journal: jr, Identity: store.Identity{Instance: "i", Generation: "g"}}
	if win != nil {
		opts.Windows = win
		opts.Clock = windows.FuncClock(func() time.Time { return time.Unix(1772359200, 0) })
	}
	b := New(nil, opts)
	for _, g := range in {
		errs := make([]error, len(g))
		if _, err := b.AddGroup(g, errs); err != nil {
			t.Fatal(err)
		}
		for i, e := range errs {
			if e != nil {
				t.Fatalf("change %d: %v", i, e)
			}
		}
	}
	if _, err := b.acc.Cut(); err != nil {
		t.Fatal(err)
	}
	if got := unwindowed(b.flusher.rounds[0].batch()); !slices.Equal(got, want) {
		t.Errorf("live round: got %v; want %v", got, want)
	}
	rec := replayJournal(t, jr, dir)
	if len(rec) != 1 {
		t.Fatalf("recovered %d rounds; want 1", len(rec))
	}
	r := New(nil, Options{Recovered: rec})
	if got := unwindowed(r.flusher.rounds[0].batch()); !slices.Equal(got, want) {
		t.Errorf("replayed round: got %v; want %v", got, want)
	}
}

// unwindowed is b without its bucket changes, sorted.
func unwindowed(b []change.Change) []change.Change {
	return sorted(slices.DeleteFunc(b, func(c change.Change) bool { return c.Kind.Windowed() }))
}

func sorted(b []change.Change) []change.Change {
	slices.SortFunc(b, func(x, y change.Change) int {
		return cmp.Or(cmp.Compare(x.Key, y.Key), cmp.Compare(x.Kind, y.Kind))
	})
	return b
}

// A SET checks no overflow (it replaces), and increments after it are
// checked against the new value.
func TestSetOverflowCheck(t *testing.T) {
	t.Parallel()
	b := New(nil, Options{})
	items := []change.Change{incr("a", 1<<62), incr("a", 1<<62), set("a", 1<<63-1), incr("a", 1), set("a", 0), incr("a", 1)}
	errs := make([]error, len(items))
	if _, err := b.AddGroup(items, errs); err != nil {
		t.Fatal(err)
	}
	want := []error{nil, ErrOverflow, nil, ErrOverflow, nil, nil}
	for i := range want {
		if errs[i] != want[i] {
			t.Errorf("change %d: got %v; want %v", i, errs[i], want[i])
		}
	}
}
