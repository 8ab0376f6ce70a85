package pending_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
)

// JournalRefused stands from a refused journal append until one
// succeeds, keeping the time of the first refusal and the size of the
// last refused record; an item Encode refuses is not the journal
// refusing.
func TestJournalRefused(t *testing.T) {
	t.Parallel()
	jr, _, err := journal.Open(journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncNo, MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer jr.Close()
	b := pending.New(nil, pending.Options{Journal: jr})
	add := func(n int) error {
		t.Helper()
		items := make([]change.Change, n)
		for i := range items {
			items[i] = change.Change{Key: fmt.Sprintf("key:%032d", i), Kind: change.Total, Delta: 1}
		}
		_, err := b.AddGroup(items, make([]error, n))
		return err
	}
	if err := add(1); err != nil {
		t.Fatal(err)
	}
	if r := b.JournalRefused(); r != nil {
		t.Fatalf("after an accepted group: got refusal %v; want nil", r.Err)
	}
	if err := add(200); !errors.Is(err, journal.ErrFull) {
		t.Fatalf("a group past MaxBytes: got %v; want ErrFull", err)
	}
	first := b.JournalRefused()
	if first == nil || !errors.Is(first.Err, journal.ErrFull) || first.Bytes <= 0 {
		t.Fatalf("after a refused group: got %+v; want a refusal wrapping ErrFull with the record's size", first)
	}
	if err := add(300); !errors.Is(err, journal.ErrFull) {
		t.Fatalf("a larger group past MaxBytes: got %v; want ErrFull", err)
	}
	if r := b.JournalRefused(); r == nil || !r.Since.Equal(first.Since) || r.Bytes <= first.Bytes {
		t.Fatalf("after a second refusal: got %+v; want the first's Since (%v) and a larger size than %d", r, first.Since, first.Bytes)
	}
	if err := add(1); err != nil {
		t.Fatal(err)
	}
	if r := b.JournalRefused(); r != nil {
		t.Fatalf("after an accepted group again: got refusal %v; want nil", r.Err)
	}
}
