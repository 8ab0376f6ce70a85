package journal_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/counterd/counterd/internal/journal"
)

// FuzzOpen feeds arbitrary bytes after a valid segment header to recovery:
// it must not panic, and unless it reports an error it must keep a prefix
// of whole records that a second recovery accepts unchanged.
func FuzzOpen(f *testing.F) {
	seedDir := f.TempDir()
	j, _, err := journal.Open(journal.Options{Dir: seedDir, Fsync: journal.FsyncNo})
	if err != nil {
		f.Fatal(err)
	}
	for _, its := range [][]journal.Item{
		items("post:1", 1),
		items("post:1", -1, "post:2", 1<<40, "", 0),
		items("a", 1, "a", 2, "a", 3),
	} {
		if _, err := j.Append(its); err != nil {
			f.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		f.Fatal(err)
	}
	body := readFile(f, segPath(seedDir, 1))[16:]
	f.Add(body)
	f.Add(body[:len(body)-3])
	f.Add([]byte{})
	f.Add(make([]byte, 8))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})

	const id = "0123456789abcdef0123456789abcdef"
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "instance-id"), []byte(id)) // spares an fsync per run
		data := append(header("CNTJ", 1, 1), body...)
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
		if s.Bytes+s.Truncated != int64(len(data)) {
			t.Fatalf("Bytes %d + Truncated %d: got %d; want the file size %d", s.Bytes, s.Truncated, s.Bytes+s.Truncated, len(data))
		}
		if got := readFile(t, segPath(dir, 1)); !bytes.Equal(got, data[:s.Bytes]) {
			t.Fatalf("segment after recovery: got %x; want the prefix %x", got, data[:s.Bytes])
		}
		if s.Records == 0 && len(s.Deltas) != 0 {
			t.Fatalf("no records but deltas %v", s.Deltas)
		}
		j, again, err := journal.Open(opts)
		if err != nil {
			t.Fatalf("second Open: %v", err)
		}
		defer j.Close()
		a := again[0]
		if a.Truncated != 0 || a.Records != s.Records || a.Bytes != s.Bytes {
			t.Fatalf("second recovery: got %d records, %d bytes, %d truncated; want %d, %d, 0",
				a.Records, a.Bytes, a.Truncated, s.Records, s.Bytes)
		}
		checkDeltas(t, 1, a.Deltas, s.Deltas)
	})
}
