package pending_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/store"
)

// A group whose journal append fails is refused whole and leaves nothing
// behind, even when it holds the same new key twice. (The old accept path
// folded first and undid on failure, and undoing a key added twice in one
// group dereferenced the cell it had already deleted: the daemon died.)
func TestFailedAppendLeavesNothing(t *testing.T) {
	t.Parallel()
	jr, _, err := journal.Open(journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncNo, MaxBytes: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer jr.Close()
	b := pending.New(nil, pending.Options{Journal: jr})
	items := []change.Change{
		{Key: "d", Kind: change.Total, Delta: 1},
		{Key: "d", Kind: change.Total, Delta: 1},
		{Key: "e", Kind: change.Total, Delta: 5},
	}
	errs := make([]error, len(items))
	if _, err := b.AddGroup(items, errs); !errors.Is(err, journal.ErrFull) {
		t.Fatalf("AddGroup on a full journal: got %v; want ErrFull", err)
	}
	if got := b.PendingKeys(); got != 0 {
		t.Fatalf("pending keys after a refused group: got %d; want 0", got)
	}
}

// A group holding one key several times is checked as a whole: the second
// increment that would overflow is refused, the others accepted.
func TestGroupChecksRepeatedKeys(t *testing.T) {
	t.Parallel()
	b := pending.New(nil, pending.Options{MaxPendingKeys: 2})
	items := []change.Change{
		{Key: "a", Kind: change.Total, Delta: 1 << 62},
		{Key: "a", Kind: change.Total, Delta: 1<<62 - 1},
		{Key: "a", Kind: change.Total, Delta: 1},
		{Key: "b", Kind: change.Total, Delta: 1},
		{Key: "c", Kind: change.Total, Delta: 1}, // a third new key: over the bound
		{Key: "b", Kind: change.Total, Delta: 1},
	}
	errs := make([]error, len(items))
	if _, err := b.AddGroup(items, errs); err != nil {
		t.Fatal(err)
	}
	want := []error{nil, nil, pending.ErrOverflow, nil, pending.ErrBackoff, nil}
	for i := range want {
		if !errors.Is(errs[i], want[i]) {
			t.Errorf("item %d: got %v; want %v", i, errs[i], want[i])
		}
	}
	if got := b.PendingKeys(); got != 2 {
		t.Fatalf("pending keys: got %d; want 2", got)
	}
}

// GET stays exact while a round is half committed and queued for retry:
// one of its two transactions committed and the other failed, so the
// committed lanes are counted from the store and the rest from memory,
// none twice. (With a read/commit gate, the old reads counted the
// committed lanes twice until the retry succeeded.)
func TestGetExactWithHalfCommittedRound(t *testing.T) {
	t.Parallel()
	h := startHalfCommitted(t, pending.Options{}) // read_merge_test.go
	b, ctx := h.b, context.Background()
	// Enough keys for two transactions (one per 2,000 keys).
	keys := make([]string, 4500)
	for i := range keys {
		keys[i] = fmt.Sprintf("post:%d", i)
	}
	keys[0] = "poison"
	for i, k := range keys {
		if err := b.Add([]byte(k), int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if stored := len(h.wait(t)); stored == len(keys) {
		t.Fatalf("keys of the half-committed round stored: got all %d; want some", stored)
	}
	check := func(when string) {
		t.Helper()
		got, err := b.Get(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i := range keys {
			if got[i] != int64(i+1) {
				bad++
				if bad < 5 {
					t.Errorf("%s: %s (lane %d): got %d; want %d", when, keys[i], store.LaneOf(keys[i]), got[i], i+1)
				}
			}
		}
		if bad > 0 {
			t.Fatalf("%s: %d of %d keys wrong", when, bad, len(keys))
		}
	}
	check("half committed")
	h.disarm()
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check("committed")
}
