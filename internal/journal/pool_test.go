package journal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/journal"
)

// crashCopy copies the files of an open journal's directory, as kill -9
// would leave them (the kernel's view, no fsync needed), into a new
// directory, and returns it. The journal keeps running.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		writeFile(t, filepath.Join(to, e.Name()), readFile(t, filepath.Join(dir, e.Name())))
	}
	return to
}

// round appends kv as one record, then rotates, seals and removes the
// closed segment as a committed round; it returns the closed sequence
// number.
func round(t *testing.T, j *journal.Journal, kv ...any) uint64 {
	t.Helper()
	appendT(t, j, kv...)
	closed, ok, err := j.Rotate()
	if err != nil || !ok {
		t.Fatalf("Rotate: got %v, %v; want a rotation", ok, err)
	}
	if err := j.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := j.Remove(closed); err != nil {
		t.Fatal(err)
	}
	return closed
}

func sameFile(t *testing.T, a os.FileInfo, path string) bool {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(a, st)
}

// A committed segment's file is reused for a later segment: its old,
// longer content is gone, and recovery at any point after the rotation
// into it finds exactly the new segment's records.
func TestRecycledSegmentHoldsOnlyItsOwnRecords(t *testing.T) {
	t.Parallel()
	for _, mode := range []journal.FsyncMode{journal.FsyncEverySec, journal.FsyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			j, _ := openT(t, journal.Options{Dir: dir, Fsync: mode})
			// Segment 1 is long: many records of a long key.
			long := strings.Repeat("x", 1000)
			for range 50 {
				appendT(t, j, long, 1)
			}
			first, err := os.Stat(segPath(dir, 1))
			if err != nil {
				t.Fatal(err)
			}
			round(t, j, long, 1) // closes 1, prepares 3 new, pools 1
			round(t, j, "a", 1)  // closes 2, prepares 4 from 1's file, pools 2
			if !sameFile(t, first, segPath(dir, 4)) {
				t.Fatal("segment 4 is a new file; want segment 1's file reused")
			}
			appendT(t, j, "b", 2) // into 3
			closed, _, err := j.Rotate()
			if err != nil || closed != 3 {
				t.Fatalf("Rotate: got %d, %v; want 3", closed, err)
			}

			// Crash right after the rotation into the recycled file.
			afterRotate := crashCopy(t, dir)
			pos := appendT(t, j, "c", 3)
			if err := j.WaitDurable(t.Context(), pos); err != nil {
				t.Fatal(err)
			}
			afterAppend := crashCopy(t, dir)
			if got, want := fileSize(t, segPath(dir, 4)), pos.Offset; got != want {
				t.Errorf("recycled segment 4: got %d bytes; want %d, its header and one record", got, want)
			}

			check := func(dir string, want4 map[string]int64) {
				t.Helper()
				_, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
				if len(segs) != 2 || segs[0].Seq != 3 || segs[1].Seq != 4 {
					t.Fatalf("recovered %+v; want segments 3 and 4", segs)
				}
				for _, s := range segs {
					if s.Truncated != 0 || s.Skipped != 0 {
						t.Errorf("segment %d: %d bytes truncated, %d records skipped; want none", s.Seq, s.Truncated, s.Skipped)
					}
				}
				checkDeltas(t, 3, segs[0].Changes, map[string]int64{"b": 2})
				checkDeltas(t, 4, segs[1].Changes, want4)
				checkNothingAside(t, dir)
				if free, _ := filepath.Glob(filepath.Join(dir, "*.free")); len(free) != 0 {
					t.Errorf("pooled files after Open: got %v; want none", free)
				}
			}
			check(afterRotate, map[string]int64{})
			check(afterAppend, map[string]int64{"c": 3})
		})
	}
}

// A crash between a round's commit and its Remove, or in the middle of
// Remove pooling the file, recovers the committed segment (the caller
// skips it) or nothing; never a pooled file as a segment.
func TestCrashAroundRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncEverySec})
	appendT(t, j, "a", 1)
	if _, _, err := j.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := j.Seal(); err != nil {
		t.Fatal(err)
	}
	committed := crashCopy(t, dir) // committed, not yet removed
	if err := j.Remove(1); err != nil {
		t.Fatal(err)
	}
	pooled := crashCopy(t, dir)
	if _, err := os.Stat(filepath.Join(pooled, "00000000000000000001.free")); err != nil {
		t.Fatalf("segment 1 after Remove: %v; want it pooled", err)
	}
	// Remove truncates before it renames: a crash between leaves segment
	// 1 as a bare header.
	truncated := t.TempDir()
	writeFile(t, segPath(truncated, 1), readFile(t, filepath.Join(pooled, "00000000000000000001.free")))
	writeFile(t, filepath.Join(truncated, "instance-id"), readFile(t, filepath.Join(pooled, "instance-id")))

	f := func(dir string, want map[uint64]map[string]int64) {
		t.Helper()
		_, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
		got := map[uint64]map[string]int64{}
		for _, s := range segs {
			if s.Truncated != 0 || s.Skipped != 0 {
				t.Errorf("segment %d: damaged; want clean", s.Seq)
			}
			if s.Records > 0 || s.Seq == 1 {
				got[s.Seq] = deltas(s.Changes)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("recovered %v; want %v", got, want)
		}
		for seq, w := range want {
			checkDeltas(t, seq, segs[slicesIndex(segs, seq)].Changes, w)
		}
		checkNothingAside(t, dir)
	}
	f(committed, map[uint64]map[string]int64{1: {"a": 1}})
	f(truncated, map[uint64]map[string]int64{1: {}})
	f(pooled, map[uint64]map[string]int64{})
}

func slicesIndex(segs []journal.Segment, seq uint64) int {
	for i, s := range segs {
		if s.Seq == seq {
			return i
		}
	}
	return -1
}

// A pooled file caught between its new header and its rename (a crash, or
// power loss undoing the rename) has a good header naming a later segment
// than its file name. It is not a segment: without records it is deleted,
// with records (only power loss can leave those, none reported durable)
// it is set aside. A later segment's header under an earlier name is the
// only mismatch tolerated.
func TestFileCaughtMidReuse(t *testing.T) {
	t.Parallel()
	const gen = "00112233445566778899aabbccddeeff"
	stale := append(header2(3, gen), journal.AppendV1Record(nil, items("old", 5))...)
	tests := []struct {
		name  string
		data  []byte
		aside bool
	}{
		{"bare header", header2(7, gen), false},
		{"with records", append(header2(7, gen), stale[headerSize:]...), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, segPath(dir, 3), tt.data)
			writeFile(t, filepath.Join(dir, "00000000000000000002.free"), stale)
			j, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
			if len(segs) != 0 {
				t.Errorf("recovered %+v; want nothing", segs)
			}
			if got := j.Current(); got != 1 {
				t.Errorf("Current: got %d; want 1", got)
			}
			for _, p := range []string{segPath(dir, 3), filepath.Join(dir, "00000000000000000002.free")} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s after Open: got %v; want it gone", p, err)
				}
			}
			if !tt.aside {
				checkNothingAside(t, dir)
				return
			}
			kept, _ := filepath.Glob(filepath.Join(dir, "damaged", "*"))
			if len(kept) != 1 || !bytes.Equal(readFile(t, kept[0]), tt.data) {
				t.Errorf("damaged/: got %v; want the file as it was", kept)
			}
		})
	}
}

// Reusing a pooled file needs no new disk space: on a full disk Seal still
// prepares the next segment from a committed one, and the rotation into it
// succeeds, so rounds keep moving while the disk is full.
func TestPoolOnFullDisk(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "64k")
	dir := filepath.Join(mnt, "journal")
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncEverySec})
	appendT(t, j, "a", 1)
	first, err := os.Stat(segPath(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	round(t, j, "a", 1) // closes 1 (prepares 3), pools 1
	appendT(t, j, "b", 1)
	filler := fillUp(t, mnt)
	if _, err := j.Append(items(strings.Repeat("k", 5000), 1)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk: got %v; want ENOSPC", err)
	}
	closed, ok, err := j.Rotate()
	if err != nil || !ok || closed != 2 {
		t.Fatalf("Rotate on a full disk: got %d, %v, %v; want 2, true, nil", closed, ok, err)
	}
	if err := j.Seal(); err != nil {
		t.Fatalf("Seal on a full disk with a pooled file: %v", err)
	}
	if !sameFile(t, first, segPath(dir, 4)) {
		t.Error("segment 4 is not segment 1's file")
	}
	appendT(t, j, "c", 1) // into 3, still within its first page
	if closed, ok, err := j.Rotate(); err != nil || !ok || closed != 3 {
		t.Fatalf("Rotate into the recycled file: got %d, %v, %v; want 3, true, nil", closed, ok, err)
	}
	// Removing committed rounds frees the disk, pooled or not.
	for _, seq := range []uint64{2, 3} {
		if err := j.Remove(seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	pos := appendT(t, j, "d", 4)
	if pos.Seq != 4 {
		t.Errorf("Append went to segment %d; want 4", pos.Seq)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if len(segs) != 1 || segs[0].Seq != 4 || segs[0].Truncated != 0 {
		t.Fatalf("recovered %+v; want segment 4 alone, clean", segs)
	}
	checkDeltas(t, 4, segs[0].Changes, map[string]int64{"d": 4})
}

// In everysec Seal leaves a closed segment's fsync to the syncer; Close
// (like the syncer's next tick) fsyncs it if it was not Removed first.
func TestEverySecSyncsSealedSegmentsLater(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	j, _ := openT(t, journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncEverySec, Metrics: set})
	appendT(t, j, "a", 1)
	if _, _, err := j.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := j.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if got := counter(set, "counterd_journal_fsyncs_total"); got != 1 {
		t.Errorf("fsyncs after Close: got %d; want 1, the sealed segment's", got)
	}
}
