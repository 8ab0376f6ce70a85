package journal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/change"
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
func reopenClean(t *testing.T, dir string, records int, size int64, want map[string]int64) {
	t.Helper()
	_, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	s := segs[0]
	if s.Truncated != 0 || s.Skipped != 0 || s.Records != records || s.Bytes != size {
		t.Errorf("second recovery: got %d records, %d bytes, %d truncated, %d skipped; want %d, %d, 0, 0",
			s.Records, s.Bytes, s.Truncated, s.Skipped, records, size)
	}
	checkDeltas(t, s.Seq, s.Changes, want)
}

// checkKeptAside checks that dir/damaged holds exactly one file, the
// original of a repaired segment.
func checkKeptAside(t *testing.T, dir string, original []byte) {
	t.Helper()
	kept, err := filepath.Glob(filepath.Join(dir, "damaged", "*"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("damaged/: got %v, %v; want one file", kept, err)
	}
	if got := readFile(t, kept[0]); !bytes.Equal(got, original) {
		t.Errorf("%s: got %x; want the original %x", kept[0], got, original)
	}
	if st, err := os.Stat(filepath.Join(dir, "damaged")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("damaged/: got %v, %v; want mode 0700", st.Mode(), err)
	}
}

// checkNothingAside checks that no segment was kept aside in dir.
func checkNothingAside(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "damaged")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("damaged/: got %v; want none", err)
	}
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
			if s.Records != 2 || s.Bytes != ends[1] || s.Truncated != cut-ends[1] || s.Skipped != 0 {
				t.Errorf("got %d records, %d bytes, %d truncated, %d skipped; want 2, %d, %d, 0",
					s.Records, s.Bytes, s.Truncated, s.Skipped, ends[1], cut-ends[1])
			}
			checkDeltas(t, 1, s.Changes, want)
			if got := readFile(t, segPath(dir, 1)); !bytes.Equal(got, data[:ends[1]]) {
				t.Errorf("file: got %x; want the first two records %x", got, data[:ends[1]])
			}
			checkKeptAside(t, dir, data[:cut])
			if got := counter(set, "counterd_journal_corrupt_tails_total"); got != 1 {
				t.Errorf("corrupt tails: got %d; want 1", got)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			reopenClean(t, dir, 2, ends[1], want)
			checkKeptAside(t, dir, data[:cut])
		})
	}
}

// A damaged record whose framing is intact is skipped: the records after
// it are kept.
func TestDamagedRecordIsSkipped(t *testing.T) {
	t.Parallel()
	data, ends := threeRecords(t)
	want := map[string]int64{"post:1": 1, "post:2": 0, "post:4": math.MinInt64}
	tests := []struct {
		name string
		at   int64 // the byte flipped
	}{
		{"checksum", ends[0] + 5},
		{"first payload byte", ends[0] + 8},
		{"last payload byte", ends[1] - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			flipped := bytes.Clone(data)
			flipped[tt.at] ^= 0x40
			dir := t.TempDir()
			writeFile(t, segPath(dir, 1), flipped)
			set := metrics.NewSet()
			j, segs, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo, Metrics: set})
			if err != nil {
				t.Fatal(err)
			}
			s := segs[0]
			size := ends[0] + ends[2] - ends[1]
			if s.Records != 2 || s.Skipped != 1 || s.Truncated != 0 || s.Bytes != size {
				t.Errorf("got %d records, %d skipped, %d truncated, %d bytes; want 2, 1, 0, %d",
					s.Records, s.Skipped, s.Truncated, s.Bytes, size)
			}
			checkDeltas(t, 1, s.Changes, want)
			wantFile := slices.Concat(data[:ends[0]], data[ends[1]:])
			if got := readFile(t, segPath(dir, 1)); !bytes.Equal(got, wantFile) {
				t.Errorf("file: got %x; want records 1 and 3 %x", got, wantFile)
			}
			checkKeptAside(t, dir, flipped)
			if got := counter(set, "counterd_journal_skipped_records_total"); got != 1 {
				t.Errorf("skipped records: got %d; want 1", got)
			}
			if got := counter(set, "counterd_journal_corrupt_tails_total"); got != 0 {
				t.Errorf("corrupt tails: got %d; want 0", got)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			reopenClean(t, dir, 2, size, want)
		})
	}
}

// Every bit flip in the middle record loses that record and keeps the first;
// one outside its length field keeps the third too.
func TestBitFlip(t *testing.T) {
	t.Parallel()
	data, ends := threeRecords(t)
	first := map[string]int64{"post:1": 1, "post:2": -7}
	firstAndThird := map[string]int64{"post:1": 1, "post:2": 0, "post:4": math.MinInt64}
	for bit := ends[0] * 8; bit < ends[1]*8; bit++ {
		t.Run(fmt.Sprint(bit), func(t *testing.T) {
			t.Parallel()
			flipped := bytes.Clone(data)
			flipped[bit/8] ^= 1 << (bit % 8)
			dir := t.TempDir()
			writeFile(t, segPath(dir, 1), flipped)
			j, segs, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo})
			if err != nil {
				t.Fatal(err)
			}
			s := segs[0]
			inLength := bit/8 < ends[0]+4
			switch {
			case !inLength && (s.Records != 2 || s.Skipped != 1 || s.Truncated != 0):
				t.Errorf("got %d records, %d skipped, %d truncated; want 2, 1, 0", s.Records, s.Skipped, s.Truncated)
			case s.Records == 1:
				checkDeltas(t, 1, s.Changes, first)
			case s.Records == 2:
				checkDeltas(t, 1, s.Changes, firstAndThird)
			default:
				t.Errorf("got %d records; want 1 or 2", s.Records)
			}
			if got := readFile(t, segPath(dir, 1)); !bytes.HasPrefix(got, data[:ends[0]]) || int64(len(got)) != s.Bytes {
				t.Errorf("file after recovery: got %x; want %d bytes starting with the first record %x", got, s.Bytes, data[:ends[0]])
			}
			checkKeptAside(t, dir, flipped)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			_, again := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
			if a := again[0]; a.Records != s.Records || a.Skipped != 0 || a.Truncated != 0 || !slices.Equal(a.Changes, s.Changes) {
				t.Errorf("second recovery: got %+v; want %+v without damage", a, s)
			}
		})
	}
}

// A version 1 segment, written before generations, kinds and buckets, is
// read as changes of kind Total in bucket 0 and left as it is.
func TestV1SegmentIsConverted(t *testing.T) {
	t.Parallel()
	recs := []change.Change{
		{Key: "post:1", Kind: change.Total, Delta: 3},
		{Key: "hot", Kind: change.Total, Delta: 20, Var: 380},
		{Key: "post:1", Kind: change.Total, Delta: -1},
	}
	data := header("CNTJ", 1, 5)
	data = journal.AppendV1Record(data, recs[:2])
	end1 := int64(len(data))
	data = journal.AppendV1Record(data, recs[2:])
	want := []change.Change{
		{Key: "post:1", Kind: change.Total, Delta: 2},
		{Key: "hot", Kind: change.Total, Delta: 20, Var: 380},
	}

	dir := t.TempDir()
	writeFile(t, segPath(dir, 5), data)
	j, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if len(segs) != 1 {
		t.Fatalf("recovered %d segments; want 1", len(segs))
	}
	s := segs[0]
	if s.Seq != 5 || s.Generation != "" || s.Records != 2 || s.Bytes != int64(len(data)) || s.Truncated != 0 || s.Skipped != 0 {
		t.Errorf("got %+v; want segment 5, no generation, 2 records, %d bytes, no damage", s, len(data))
	}
	if !slices.Equal(s.Changes, want) {
		t.Errorf("changes: got %v; want %v", s.Changes, want)
	}
	if got := readFile(t, segPath(dir, 5)); !bytes.Equal(got, data) {
		t.Errorf("file changed: got %x; want %x", got, data)
	}
	checkNothingAside(t, dir)
	if got, want := readFile(t, segPath(dir, 6))[:headerSize], header2(6, j.Generation()); !bytes.Equal(got, want) {
		t.Errorf("new segment 6 header: got %x; want version 2 %x", got, want)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// A torn version 1 segment is repaired as version 1.
	dir = t.TempDir()
	writeFile(t, segPath(dir, 5), data[:len(data)-1])
	_, segs = openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if s := segs[0]; s.Records != 1 || s.Bytes != end1 || s.Truncated != int64(len(data)-1)-end1 || s.Generation != "" {
		t.Errorf("torn: got %+v; want 1 record, %d bytes", s, end1)
	}
	if got := readFile(t, segPath(dir, 5)); !bytes.Equal(got, data[:end1]) {
		t.Errorf("torn: file: got %x; want %x", got, data[:end1])
	}
	checkKeptAside(t, dir, data[:len(data)-1])
}

func TestBadHeaderIsAnError(t *testing.T) {
	t.Parallel()
	const gen = "00112233445566778899aabbccddeeff"
	record := journal.AppendV1Record(nil, items("k", 1))
	v3 := header2(1, gen)
	binary.LittleEndian.PutUint32(v3[4:], 3)
	badCRC := header2(1, gen)
	badCRC[20] ^= 1
	tests := []struct {
		name string
		seq  uint64 // in the file name
		data []byte
		want string
	}{
		{"bad magic", 1, header("CNTX", 1, 1), "bad magic"},
		{"zeroed", 1, make([]byte, 16), "bad magic"},
		{"version 0", 1, header("CNTJ", 0, 1), "version 0"},
		{"version 3", 1, header("CNTJ", 3, 1), "version 3"},
		{"version 3 with records", 1, append(v3, record...), "version 3"},
		{"version 3 shorter than a header", 1, v3[:12], "version 3"},
		{"name mismatch", 2, header("CNTJ", 1, 1), "header says segment 1"},
		{"name mismatch v2", 2, header2(1, gen), "header says segment 1"},
		{"header checksum", 1, badCRC, "header checksum"},
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
			checkNothingAside(t, dir)
		})
	}
}

// A record of a kind this build does not know was written by a newer one:
// Open refuses it rather than drop it as damage.
func TestUnknownKindIsAnError(t *testing.T) {
	t.Parallel()
	// One item: kind 200, key "k", delta 1, variance 0, bucket 60.
	payload := []byte{1, 200, 1, 'k', 2, 0, 120}
	data := header2(1, "00112233445566778899aabbccddeeff")
	for range 2 {
		data = binary.LittleEndian.AppendUint32(data, uint32(len(payload)))
		data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
		data = append(data, payload...)
	}
	data = append(data, 0xff) // and a torn tail, which must not be cut either
	dir := t.TempDir()
	path := segPath(dir, 1)
	writeFile(t, path, data)
	_, _, err := journal.Open(journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "kind 200") {
		t.Fatalf("Open: got %v; want an error naming %s and saying %q", err, path, "kind 200")
	}
	if got := readFile(t, path); !bytes.Equal(got, data) {
		t.Errorf("file changed: got %x; want %x", got, data)
	}
	checkNothingAside(t, dir)
}

func TestShortSegmentGetsItsHeader(t *testing.T) {
	t.Parallel()
	full := header2(3, "00112233445566778899aabbccddeeff")
	for _, size := range []int{0, 1, 4, 8, 15, 16, 35} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, segPath(dir, 3), full[:size])
			j, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
			if len(segs) != 1 || segs[0].Seq != 3 || segs[0].Records != 0 || segs[0].Bytes != headerSize ||
				segs[0].Truncated != int64(size) || segs[0].Generation != j.Generation() {
				t.Fatalf("got %+v; want [segment 3, no records, %d bytes, %d truncated, generation %s]",
					segs, headerSize, size, j.Generation())
			}
			if got, want := readFile(t, segPath(dir, 3)), header2(3, j.Generation()); !bytes.Equal(got, want) {
				t.Errorf("file: got %x; want header %x", got, want)
			}
			checkKeptAside(t, dir, full[:size])
			if got := j.Current(); got != 4 {
				t.Errorf("Current: got %d; want 4", got)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			reopenClean(t, dir, 0, headerSize, map[string]int64{})
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
	if name := filepath.Base(segPath(dir, 101)); fileSize(t, filepath.Join(dir, name)) != headerSize {
		t.Errorf("new segment %s is not a bare header", name)
	}
}
