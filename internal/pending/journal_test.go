package pending

import (
	"testing"

	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/store"
)

// openJournal opens a journal in a fresh directory, without fsync.
func openJournal(t *testing.T) (*journal.Journal, string) {
	t.Helper()
	dir := t.TempDir()
	jr, _, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return jr, dir
}

// replayJournal closes jr and reopens its directory as a restart would,
// returning the rounds it recovers, oldest first.
func replayJournal(t *testing.T, jr *journal.Journal, dir string) []Recovered {
	t.Helper()
	if err := jr.Close(); err != nil {
		t.Fatal(err)
	}
	jr2, segs, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jr2.Close() })
	var rec []Recovered
	for _, s := range segs {
		if len(s.Changes) > 0 {
			rec = append(rec, Recovered{ID: store.BatchID{Seq: s.Seq}, Changes: s.Changes})
		}
	}
	return rec
}
