package journal_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, mode := range []journal.FsyncMode{journal.FsyncEverySec, journal.FsyncAlways, journal.FsyncNo} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "journal")
			opts := journal.Options{Dir: dir, Fsync: mode}
			j, segs, err := journal.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(segs) != 0 {
				t.Fatalf("fresh journal recovered %d segments; want 0", len(segs))
			}
			gen := j.Generation()
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(gen) {
				t.Fatalf("Generation: got %q; want 32 lowercase hex characters", gen)
			}
			if got := j.Current(); got != 1 {
				t.Fatalf("Current: got %d; want 1", got)
			}
			appendT(t, j, "a", 1, "b", 2)
			appendT(t, j, "a", 3)
			rotate(t, j, 1)
			appendT(t, j, "c", -5, "c", math.MaxInt64)
			rotate(t, j, 2)
			appendT(t, j, "a", 10)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatalf("second Close: got %v; want nil", err)
			}

			j, segs = openT(t, opts)
			want := []struct {
				Seq     uint64
				Deltas  map[string]int64
				Records int
			}{
				{Seq: 1, Deltas: map[string]int64{"a": 4, "b": 2}, Records: 2},
				{Seq: 2, Deltas: map[string]int64{"c": math.MaxInt64 - 5}, Records: 1},
				{Seq: 3, Deltas: map[string]int64{"a": 10}, Records: 1},
			}
			if len(segs) != len(want) {
				t.Fatalf("recovered %d segments; want %d", len(segs), len(want))
			}
			var sum int64
			for i, s := range segs {
				if s.Seq != want[i].Seq || s.Records != want[i].Records || s.Truncated != 0 {
					t.Errorf("segment %d: got seq %d, %d records, %d truncated; want seq %d, %d records, 0 truncated",
						i, s.Seq, s.Records, s.Truncated, want[i].Seq, want[i].Records)
				}
				checkDeltas(t, s.Seq, s.Changes, want[i].Deltas)
				if size := fileSize(t, segPath(dir, s.Seq)); s.Bytes != size {
					t.Errorf("segment %d Bytes: got %d; want file size %d", s.Seq, s.Bytes, size)
				}
				if s.Generation != gen {
					t.Errorf("segment %d Generation: got %q; want %q, the writer's", s.Seq, s.Generation, gen)
				}
				sum += s.Bytes
			}
			if j.Generation() == gen {
				t.Errorf("reopened journal kept generation %q; want a fresh one", gen)
			}
			if got := j.Current(); got != 4 {
				t.Errorf("Current after reopen: got %d; want 4", got)
			}
			if got, want := j.Bytes(), sum+headerSize; got != want {
				t.Errorf("Bytes: got %d; want %d", got, want)
			}

			before := j.Bytes()
			if err := j.Remove(1); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(segPath(dir, 1)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("stat removed segment: got %v; want ErrNotExist", err)
			}
			if got, want := j.Bytes(), before-segs[0].Bytes; got != want {
				t.Errorf("Bytes after Remove: got %d; want %d", got, want)
			}
			if err := j.Remove(1); err != nil {
				t.Errorf("removing segment 1 again: got %v; want nil", err)
			}
			if err := j.Remove(99); err != nil {
				t.Errorf("removing unknown segment: got %v; want nil", err)
			}
			if err := j.Remove(4); err == nil {
				t.Error("removing the current segment: got nil error; want one")
			}
			if pos := appendT(t, j, "d", 1); pos.Seq != 4 {
				t.Errorf("append after reopen went to segment %d; want 4", pos.Seq)
			}
			gen2 := j.Generation()
			if got, want := j.Bytes(), liveBytes(t, dir, j.Current()); got != want {
				t.Errorf("Bytes: got %d; want %d on disk", got, want)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}

			_, segs = openT(t, opts)
			var seqs []uint64
			for _, s := range segs {
				seqs = append(seqs, s.Seq)
			}
			if len(seqs) != 3 || seqs[0] != 2 || seqs[1] != 3 || seqs[2] != 4 {
				t.Fatalf("recovered seqs after Remove: got %v; want [2 3 4]", seqs)
			}
			if segs[1].Generation != gen || segs[2].Generation != gen2 {
				t.Errorf("generations of segments 3 and 4: got %q, %q; want %q, %q, each its writer's",
					segs[1].Generation, segs[2].Generation, gen, gen2)
			}
		})
	}
}

func rotate(t *testing.T, j *journal.Journal, want uint64) {
	t.Helper()
	closed, rotated, err := j.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if closed != want || !rotated {
		t.Fatalf("Rotate: got %d, %v; want %d, true", closed, rotated, want)
	}
}

func TestRotateWithoutRecordsDoesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	pos, err := j.Append(nil)
	if err != nil || pos != (journal.Position{Seq: 1, Offset: headerSize}) {
		t.Fatalf("empty Append: got %v, %v; want {1 %d}, nil", pos, err, headerSize)
	}
	closed, rotated, err := j.Rotate()
	if err != nil || closed != 1 || rotated {
		t.Fatalf("Rotate of an empty segment: got %d, %v, %v; want 1, false, nil", closed, rotated, err)
	}
	// Segment 2 exists only as the one prepared for the first rotation.
	if cur := j.Current(); cur != 1 {
		t.Errorf("current segment after an empty Rotate: got %d; want 1", cur)
	}
	if got := fileSize(t, segPath(dir, 2)); got != headerSize {
		t.Errorf("prepared segment 2: %d bytes; want %d (its header only)", got, headerSize)
	}
	appendT(t, j, "k", 1)
	rotate(t, j, 1)
	closed, rotated, err = j.Rotate()
	if err != nil || closed != 2 || rotated {
		t.Errorf("second Rotate: got %d, %v, %v; want 2, false, nil", closed, rotated, err)
	}
}

func TestClosedJournalRefusesWork(t *testing.T) {
	t.Parallel()
	j, _ := openT(t, journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncNo})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(items("k", 1)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Append after Close: got %v; want ErrClosed", err)
	}
	if _, _, err := j.Rotate(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Rotate after Close: got %v; want ErrClosed", err)
	}
	if err := j.Remove(1); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Remove after Close: got %v; want ErrClosed", err)
	}
}

func TestErrFull(t *testing.T) {
	t.Parallel()
	// Each record of "k", 1 is 8 bytes of framing and 7 of payload.
	const header, record = headerSize, 15
	dir := t.TempDir()
	set := metrics.NewSet()
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo, MaxBytes: header + 3*record, Metrics: set})
	for range 3 {
		appendT(t, j, "k", 1)
	}
	_, err := j.Append(items("k", 1))
	if !errors.Is(err, journal.ErrFull) {
		t.Fatalf("Append past MaxBytes: got %v; want ErrFull", err)
	}
	if got, want := fileSize(t, segPath(dir, 1)), int64(header+3*record); got != want {
		t.Errorf("segment size after ErrFull: got %d; want %d", got, want)
	}
	if got, want := j.Bytes(), int64(header+3*record); got != want {
		t.Errorf("Bytes after ErrFull: got %d; want %d", got, want)
	}
	if got := counter(set, "counterd_journal_append_errors_total"); got != 1 {
		t.Errorf("append errors: got %d; want 1", got)
	}

	rotate(t, j, 1) // segment 2's header takes the journal further past the limit
	if _, err := j.Append(items("k", 1)); !errors.Is(err, journal.ErrFull) {
		t.Fatalf("Append after Rotate: got %v; want ErrFull", err)
	}
	if err := j.Remove(1); err != nil {
		t.Fatal(err)
	}
	if pos := appendT(t, j, "k", 1); pos.Seq != 2 {
		t.Errorf("Append after Remove went to segment %d; want 2", pos.Seq)
	}
	if got, want := j.Bytes(), int64(header+record); got != want {
		t.Errorf("Bytes: got %d; want %d", got, want)
	}
}

func TestErrFullCountsRecoveredSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	appendT(t, j, "k", 1)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// Segment 1 (51 bytes) and the new segment 2 (36) already exceed 80.
	j, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo, MaxBytes: 80})
	if _, err := j.Append(items("k", 1)); !errors.Is(err, journal.ErrFull) {
		t.Fatalf("Append: got %v; want ErrFull", err)
	}
	if err := j.Remove(segs[0].Seq); err != nil {
		t.Fatal(err)
	}
	appendT(t, j, "k", 1)
}

func TestErrInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if _, _, err := journal.Open(journal.Options{Dir: dir}); !errors.Is(err, journal.ErrInUse) {
		t.Fatalf("second Open: got %v; want ErrInUse", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	openT(t, journal.Options{Dir: dir})
}

func TestInstanceIDIsStable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	id := j.InstanceID()
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Fatalf("InstanceID: got %q; want 32 lowercase hex characters", id)
	}
	if got := string(readFile(t, filepath.Join(dir, "instance-id"))); got != id {
		t.Errorf("instance-id file: got %q; want %q", got, id)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, _ = openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if got := j.InstanceID(); got != id {
		t.Errorf("InstanceID after reopen: got %q; want %q", got, id)
	}
	other, _ := openT(t, journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncNo})
	if other.InstanceID() == id {
		t.Errorf("two directories share instance id %q", id)
	}
}

func TestBadInstanceIDIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "instance-id"), []byte("not hex"))
	_, _, err := journal.Open(journal.Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "instance-id") {
		t.Errorf("Open: got %v; want an error naming instance-id", err)
	}
}

func TestOpenIgnoresOtherFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"notes.txt", "1.seg", "0000000000000000000x.seg", "00000000000000000001.seg.tmp"} {
		writeFile(t, filepath.Join(dir, name), []byte("junk"))
	}
	j, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if len(segs) != 0 || j.Current() != 1 {
		t.Errorf("got %d segments and Current %d; want 0 and 1", len(segs), j.Current())
	}
}

func TestBytesGauge(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	j, _ := openT(t, journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncNo, Metrics: set, MaxBytes: 1 << 20})
	appendT(t, j, "k", 1)
	var b strings.Builder
	set.WritePrometheus(&b)
	// The limit beside the bytes, so a dashboard or an alert divides one by
	// the other (deploy/prometheus's CounterdJournalNearlyFull).
	for _, want := range []string{"counterd_journal_bytes 51\n", "counterd_journal_max_bytes 1048576\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics: got\n%s\nwant a line %q", b.String(), want)
		}
	}
	if got := counter(set, "counterd_journal_appends_total"); got != 1 {
		t.Errorf("appends: got %d; want 1", got)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts journal.Options
	}{
		{"no dir", journal.Options{}},
		{"bad mode", journal.Options{Dir: t.TempDir(), Fsync: 9}},
		{"negative MaxBytes", journal.Options{Dir: t.TempDir(), MaxBytes: -1}},
	}
	for _, tt := range tests {
		if j, _, err := journal.Open(tt.opts); err == nil {
			j.Close()
			t.Errorf("%s: got nil error; want one", tt.name)
		}
	}
}

// Sampled items carry their variance through the journal.
func TestVarianceRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _ := openT(t, journal.Options{Dir: dir})
	hot := change.Change{Key: "hot", Kind: change.Total, Delta: 10, Var: 90}
	if _, err := j.Append([]change.Change{hot, {Key: "cold", Kind: change.Total, Delta: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append([]change.Change{hot}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, segs := openT(t, journal.Options{Dir: dir})
	if len(segs) != 1 {
		t.Fatalf("segments: got %d; want 1", len(segs))
	}
	s := segs[0]
	d, v := deltas(s.Changes), vars(s.Changes)
	if d["hot"] != 20 || v["hot"] != 180 || v["cold"] != 0 || d["cold"] != 1 {
		t.Fatalf("got deltas %v vars %v; want hot 20 (var 180), cold 1 (var 0)", d, v)
	}
}

// Append and Encode refuse an item that recovery could not read back,
// count it as an append error, and write nothing.
func TestAppendRefusesBadItems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	set := metrics.NewSet()
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo, Metrics: set})
	tests := []struct {
		name string
		c    change.Change
		want string
	}{
		{"kind 0", change.Change{Key: "k", Delta: 1}, "kind 0"},
		{"kind 200", change.Change{Key: "k", Kind: 200, Delta: 1}, "kind 200"},
		{"total with a bucket", change.Change{Key: "k", Kind: change.Total, Bucket: 60, Delta: 1}, "bucket 60"},
		{"negative variance", change.Change{Key: "k", Kind: change.Total, Delta: 1, Var: -1}, "variance"},
		{"NaN variance", change.Change{Key: "k", Kind: change.Total, Delta: 1, Var: math.NaN()}, "variance"},
		{"infinite variance", change.Change{Key: "k", Kind: change.Total, Delta: 1, Var: math.Inf(1)}, "variance"},
	}
	for _, tt := range tests {
		good := change.Change{Key: "good", Kind: change.Total, Delta: 1}
		if _, err := j.Append([]change.Change{good, tt.c}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Append: got %v; want an error saying %q", tt.name, err, tt.want)
		}
		if _, err := j.Encode(nil, []change.Change{good, tt.c}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Encode: got %v; want an error saying %q", tt.name, err, tt.want)
		}
	}
	if got := counter(set, "counterd_journal_append_errors_total"); got != uint64(2*len(tests)) {
		t.Errorf("append errors: got %d; want %d", got, 2*len(tests))
	}
	if got := fileSize(t, segPath(dir, 1)); got != headerSize {
		t.Errorf("segment size after refused appends: got %d; want %d", got, headerSize)
	}
	if got := j.Bytes(); got != headerSize {
		t.Errorf("Bytes after refused appends: got %d; want %d", got, headerSize)
	}
	appendT(t, j, "k", 1)
}
