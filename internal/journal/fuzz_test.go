package journal_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
)

// FuzzOpen feeds arbitrary bytes after a valid segment header of either
// format version to recovery: it must not panic; if it reports an error it
// must leave the file alone; otherwise it must keep the original of a
// damaged segment byte for byte in damaged/ and leave a segment that a
// second recovery accepts unchanged.
func FuzzOpen(f *testing.F) {
	seedDir := f.TempDir()
	j, _, err := journal.Open(journal.Options{Dir: seedDir, Fsync: journal.FsyncNo})
	if err != nil {
		f.Fatal(err)
	}
	recs := [][]change.Change{
		items("post:1", 1),
		items("post:1", -1, "post:2", 1<<40, "", 0),
		items("a", 1, "a", 2, "a", 3),
	}
	var v1 []byte
	for _, its := range recs {
		if _, err := j.Append(its); err != nil {
			f.Fatal(err)
		}
		v1 = journal.AppendV1Record(v1, its)
	}
	if err := j.Close(); err != nil {
		f.Fatal(err)
	}
	body := readFile(f, segPath(seedDir, 1))[headerSize:]
	for _, seed := range []struct {
		v1   bool
		body []byte
	}{{false, body}, {true, v1}} {
		f.Add(seed.v1, seed.body)
		f.Add(seed.v1, seed.body[:len(seed.body)-3])
		mid := bytes.Clone(seed.body)
		mid[len(mid)/2] ^= 4
		f.Add(seed.v1, mid)
	}
	f.Add(false, []byte{})
	f.Add(false, make([]byte, 8))
	f.Add(true, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})

	const id = "0123456789abcdef0123456789abcdef"
	const gen = "fedcba9876543210fedcba9876543210"
	f.Fuzz(func(t *testing.T, v1 bool, body []byte) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "instance-id"), []byte(id)) // spares an fsync per run
		h, wantGen := header2(1, gen), gen
		if v1 {
			h, wantGen = header("CNTJ", 1, 1), ""
		}
		data := append(h, body...)
		writeFile(t, segPath(dir, 1), data)
		opts := journal.Options{Dir: dir, Fsync: journal.FsyncNo}
		j, segs, err := journal.Open(opts)
		if err != nil {
			if got := readFile(t, segPath(dir, 1)); !bytes.Equal(got, data) {
				t.Fatalf("failed Open changed the segment: got %x; want %x", got, data)
			}
			return
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		s := segs[0]
		if s.Generation != wantGen {
			t.Fatalf("Generation: got %q; want %q", s.Generation, wantGen)
		}
		if got := fileSize(t, segPath(dir, 1)); s.Bytes != got {
			t.Fatalf("Bytes: got %d; want the file size %d", s.Bytes, got)
		}
		kept, _ := filepath.Glob(filepath.Join(dir, "damaged", "*"))
		if s.Skipped == 0 && s.Truncated == 0 {
			if got := readFile(t, segPath(dir, 1)); !bytes.Equal(got, data) || len(kept) != 0 {
				t.Fatalf("clean segment changed (%d kept aside): got %x; want %x", len(kept), got, data)
			}
		} else {
			if len(kept) != 1 || !bytes.Equal(readFile(t, kept[0]), data) {
				t.Fatalf("damaged segment: kept %v; want one copy of the original", kept)
			}
			if s.Bytes+s.Truncated > int64(len(data)) || (s.Skipped == 0) != (s.Bytes+s.Truncated == int64(len(data))) {
				t.Fatalf("Bytes %d + Truncated %d with %d skipped; the file had %d", s.Bytes, s.Truncated, s.Skipped, len(data))
			}
			if got := readFile(t, segPath(dir, 1)); !bytes.Equal(got[:len(h)], h) {
				t.Fatalf("repaired segment's header: got %x; want %x", got[:len(h)], h)
			}
		}
		if s.Records == 0 && len(s.Changes) != 0 {
			t.Fatalf("no records but changes %v", s.Changes)
		}
		j, again, err := journal.Open(opts)
		if err != nil {
			t.Fatalf("second Open: %v", err)
		}
		defer j.Close()
		a := again[0]
		if a.Truncated != 0 || a.Skipped != 0 || a.Records != s.Records || a.Bytes != s.Bytes || a.Generation != s.Generation {
			t.Fatalf("second recovery: got %+v; want %+v without damage", a, s)
		}
		if !slices.Equal(a.Changes, s.Changes) {
			t.Fatalf("second recovery: got changes %v; want %v", a.Changes, s.Changes)
		}
		if _, err := os.Stat(filepath.Join(dir, "damaged")); err == nil && len(kept) == 0 {
			t.Fatal("damaged/ created for a clean segment")
		}
	})
}
