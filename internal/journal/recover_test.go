package journal_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/journal"
)

// threeRecords writes a segment of three records and returns its bytes and
// the offset where each record ends.
func threeRecords(t *testing.T) (data []byte, ends [3]int64) {
	t.Helper()
	dir := t.TempDir()
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	ends[0] = appendT(t, j, "post:1", 1, "post:2", -7).Offset
	ends[1] = appendT(t, j, "post:1", 300, "post:3", 1).Offset
	ends[2] = appendT(t, j, "post:2", 7, "post:4", math.MinInt64).Offset
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return readFile(t, segPath(dir, 1)), ends
}

// reopenClean checks that recovering dir again, after the journal that
// repaired it was closed, finds the segment clean and unchanged.
func reopenClean(t *testing.T, dir string, want journal.Segment) {
	t.Helper()
	_, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	s := segs[0]
	if s.Truncated != 0 || s.Records != want.Records || s.Bytes != want.Bytes {
		t.Errorf("second recovery: got %d records, %d bytes, %d truncated; want %d, %d, 0",
			s.Records, s.Bytes, s.Truncated, want.Records, want.Bytes)
	}
	checkDeltas(t, s.Seq, s.Deltas, want.Deltas)
}

func TestTornTail(t *testing.T) {
	t.Parallel()
	data, ends := threeRecords(t)
	want := map[string]int64{"post:1": 301, "post:2": -7, "post:3": 1}
	for cut := ends[1] + 1; cut < ends[2]; cut++ {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, segPath(dir, 1), data[:cut])
			set := metrics.NewSet()
			j, segs, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo, Metrics: set})
			if err != nil {
				t.Fatal(err)
			}
			s := segs[0]
			if s.Records != 2 || s.Bytes != ends[1] || s.Truncated != cut-ends[1] {
				t.Errorf("got %d records, %d bytes, %d truncated; want 2, %d, %d",
					s.Records, s.Bytes, s.Truncated, ends[1], cut-ends[1])
			}
			checkDeltas(t, 1, s.Deltas, want)
			if got := fileSize(t, segPath(dir, 1)); got != ends[1] {
				t.Errorf("file size: got %d; want %d", got, ends[1])
			}
			if got := counter(set, "counterd_journal_corrupt_tails_total"); got != 1 {
				t.Errorf("corrupt tails: got %d; want 1", got)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			reopenClean(t, dir, journal.Segment{Records: 2, Bytes: ends[1], Deltas: want})
		})
	}
}

func TestBitFlip(t *testing.T) {
	t.Parallel()
	data, ends := threeRecords(t)
	want := map[string]int64{"post:1": 1, "post:2": -7}
	for bit := ends[0] * 8; bit < ends[1]*8; bit++ {
		t.Run(fmt.Sprint(bit), func(t *testing.T) {
			t.Parallel()
			flipped := bytes.Clone(data)
			flipped[bit/8] ^= 1 << (bit % 8)
			dir := t.TempDir()
			writeFile(t, segPath(dir, 1), flipped)
			set := metrics.NewSet()
			j, segs, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo, Metrics: set})
			if err != nil {
				t.Fatal(err)
			}
			s := segs[0]
			if s.Records != 1 || s.Bytes != ends[0] || s.Truncated != int64(len(data))-ends[0] {
				t.Errorf("got %d records, %d bytes, %d truncated; want 1, %d, %d",
					s.Records, s.Bytes, s.Truncated, ends[0], int64(len(data))-ends[0])
			}
			checkDeltas(t, 1, s.Deltas, want)
			if got := counter(set, "counterd_journal_corrupt_tails_total"); got != 1 {
				t.Errorf("corrupt tails: got %d; want 1", got)
			}
			if got := readFile(t, segPath(dir, 1)); !bytes.Equal(got, data[:ends[0]]) {
				t.Errorf("file after recovery: got %x; want the first record %x", got, data[:ends[0]])
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBadHeaderIsAnError(t *testing.T) {
	t.Parallel()
	record := []byte{4, 0, 0, 0, 1, 2, 3, 4, 1, 1, 'k', 2}
	tests := []struct {
		name string
		seq  uint64 // in the file name
		data []byte
		want string
	}{
		{"bad magic", 1, header("CNTX", 1, 1), "bad magic"},
		{"zeroed", 1, make([]byte, 16), "bad magic"},
		{"version 2", 1, header("CNTJ", 2, 1), "version 2"},
		{"name mismatch", 2, header("CNTJ", 1, 1), "header says segment 1"},
		{"bad magic with records", 1, append(header("cntj", 1, 1), record...), "bad magic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := segPath(dir, tt.seq)
			writeFile(t, path, tt.data)
			for range 2 { // the lock is released after a failed Open
				_, _, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo})
				if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Open: got %v; want an error naming %s and saying %q", err, path, tt.want)
				}
				if errors.Is(err, journal.ErrInUse) {
					t.Fatalf("Open: got %v; want a header error", err)
				}
			}
			if got := readFile(t, path); !bytes.Equal(got, tt.data) {
				t.Errorf("file changed: got %x; want %x", got, tt.data)
			}
		})
	}
}

func TestShortSegmentGetsItsHeader(t *testing.T) {
	t.Parallel()
	full := header("CNTJ", 1, 3)
	for _, size := range []int{0, 1, 4, 15} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, segPath(dir, 3), full[:size])
			j, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
			want := journal.Segment{Seq: 3, Records: 0, Bytes: 16, Truncated: int64(size)}
			if len(segs) != 1 || segs[0].Seq != want.Seq || segs[0].Records != 0 || segs[0].Bytes != 16 || segs[0].Truncated != want.Truncated {
				t.Fatalf("got %+v; want [%+v]", segs, want)
			}
			if got := readFile(t, segPath(dir, 3)); !bytes.Equal(got, full) {
				t.Errorf("file: got %x; want header %x", got, full)
			}
			if got := j.Current(); got != 4 {
				t.Errorf("Current: got %d; want 4", got)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			reopenClean(t, dir, journal.Segment{Bytes: 16, Deltas: map[string]int64{}})
		})
	}
}

func TestSumOverflowIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	appendT(t, j, "k", math.MaxInt64)
	appendT(t, j, "k", 1)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if path := segPath(dir, 1); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("Open: got %v; want an overflow error naming %s", err, path)
	}
}

func TestRecoveredSegmentsAreSorted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, seq := range []uint64{12, 3, 100, 7} {
		writeFile(t, segPath(dir, seq), header("CNTJ", 1, seq))
	}
	j, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	var got []uint64
	for _, s := range segs {
		got = append(got, s.Seq)
	}
	if fmt.Sprint(got) != "[3 7 12 100]" {
		t.Errorf("seqs: got %v; want [3 7 12 100]", got)
	}
	if j.Current() != 101 {
		t.Errorf("Current: got %d; want 101", j.Current())
	}
	if name := filepath.Base(segPath(dir, 101)); fileSize(t, filepath.Join(dir, name)) != 16 {
		t.Errorf("new segment %s is not a bare header", name)
	}
}
