package pending_test

import (
	"errors"
	"math"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
)

// AddAll, the accept path of a MULTI/EXEC transaction, accepts a group
// whole or not at all: one refused change leaves nothing journaled or
// folded, and errs names it.
func TestAddAllIsAllOrNothing(t *testing.T) {
	t.Parallel()
	total := func(key string, d int64) change.Change {
		return change.Change{Key: key, Kind: change.Total, Delta: d}
	}
	for _, tc := range []struct {
		name     string
		before   []change.Change // accepted first, with AddGroup
		items    []change.Change
		wantErrs []error // nil: the group is accepted
		wantKeys int     // pending keys afterwards
	}{
		{
			name:     "accepted",
			items:    []change.Change{total("a", 1), total("b", 2), total("a", 3)},
			wantKeys: 2,
		},
		{
			name:     "overflow refuses the others",
			before:   []change.Change{total("k", math.MaxInt64)},
			items:    []change.Change{total("other", 1), total("k", 1)},
			wantErrs: []error{nil, pending.ErrOverflow},
			wantKeys: 1,
		},
		{
			name:     "overflow within the group",
			items:    []change.Change{total("a", math.MaxInt64), total("b", 1), total("a", 1)},
			wantErrs: []error{nil, nil, pending.ErrOverflow},
			wantKeys: 0,
		},
		{
			name:     "too many pending keys",
			before:   []change.Change{total("x", 1)},
			items:    []change.Change{total("x", 1), total("y", 1), total("z", 1)},
			wantErrs: []error{nil, nil, pending.ErrBackoff},
			wantKeys: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			jr, _, err := journal.Open(journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncNo})
			if err != nil {
				t.Fatal(err)
			}
			defer jr.Close()
			b := pending.New(nil, pending.Options{Journal: jr, MaxPendingKeys: 2})
			if len(tc.before) > 0 {
				if _, err := b.AddGroup(tc.before, make([]error, len(tc.before))); err != nil {
					t.Fatal(err)
				}
			}
			errs := make([]error, len(tc.items))
			_, err = b.AddAll(tc.items, errs)
			switch {
			case tc.wantErrs == nil && err != nil:
				t.Fatalf("AddAll: got %v; want nil", err)
			case tc.wantErrs != nil && !errors.Is(err, pending.ErrNotAll):
				t.Fatalf("AddAll: got %v; want ErrNotAll", err)
			}
			for i, want := range tc.wantErrs {
				if !errors.Is(errs[i], want) {
					t.Errorf("errs[%d]: got %v; want %v", i, errs[i], want)
				}
			}
			if got := b.PendingKeys(); got != tc.wantKeys {
				t.Errorf("pending keys: got %d; want %d", got, tc.wantKeys)
			}
		})
	}
}

// A transaction whose journal append fails is refused whole, as a group.
func TestAddAllJournalFull(t *testing.T) {
	t.Parallel()
	jr, _, err := journal.Open(journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncNo, MaxBytes: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer jr.Close()
	b := pending.New(nil, pending.Options{Journal: jr})
	items := []change.Change{{Key: "a", Kind: change.Total, Delta: 1}, {Key: "b", Kind: change.Total, Delta: 1}}
	if _, err := b.AddAll(items, make([]error, len(items))); !errors.Is(err, journal.ErrFull) {
		t.Fatalf("AddAll on a full journal: got %v; want ErrFull", err)
	}
	if got := b.PendingKeys(); got != 0 {
		t.Fatalf("pending keys: got %d; want 0", got)
	}
}
