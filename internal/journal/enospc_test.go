package journal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
)

func TestAppendENOSPC(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "64k")
	filler := filepath.Join(mnt, "filler")
	writeFile(t, filler, make([]byte, 16<<10))
	dir := filepath.Join(mnt, "journal")
	set := metrics.NewSet()
	opts := journal.Options{Dir: dir, Fsync: journal.FsyncEverySec, Metrics: set}
	j, _ := openT(t, opts)

	// 300-byte records do not divide a 4 KiB page, so the last one is torn
	// by a short write before write(2) reports ENOSPC.
	key := string(make([]byte, 290))
	rec := []change.Change{{Key: key, Kind: change.Total, Delta: 1}}
	var good journal.Position
	var records int
	var err error
	for range 1000 {
		var pos journal.Position
		if pos, err = j.Append(rec); err != nil {
			break
		}
		good = pos
		records++
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full tmpfs: got %v after %d records; want ENOSPC", err, records)
	}
	if got := fileSize(t, segPath(dir, 1)); got != good.Offset {
		t.Errorf("segment size after ENOSPC: got %d; want %d, the end of the last good record", got, good.Offset)
	}
	if got := j.Bytes(); got != good.Offset {
		t.Errorf("Bytes: got %d; want %d", got, good.Offset)
	}
	if got := counter(set, "counterd_journal_append_errors_total"); got != 1 {
		t.Errorf("append errors: got %d; want 1", got)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if pos := appendT(t, j, "after", 1); pos.Seq != 1 {
		t.Errorf("Append after freeing space went to segment %d; want 1", pos.Seq)
	}
	records++
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	_, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if s := segs[0]; s.Records != records || s.Truncated != 0 {
		t.Errorf("recovered %d records, %d bytes truncated; want %d, 0", s.Records, s.Truncated, records)
	}
	if got := deltas(segs[0].Changes)[key]; got != int64(records-1) {
		t.Errorf("sum for the filler key: got %d; want %d", got, records-1)
	}
}

// fillUp writes a file in mnt until the file system is full, and returns
// its path: removing it frees the space again.
func fillUp(t *testing.T, mnt string) string {
	t.Helper()
	path := filepath.Join(mnt, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return path
		}
	}
}

// Open succeeds on a full disk, so the daemon can start and commit what the
// journal holds; Append fails until there is space for a segment again.
func TestOpenOnFullDisk(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		previous bool // a journal ran in the directory before, leaving a segment and the instance id
	}{
		{"restart", true},
		{"first start", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mnt := mountTmpfs(t, "64k")
			dir := filepath.Join(mnt, "journal")
			opts := journal.Options{Dir: dir, Fsync: journal.FsyncEverySec}
			var firstID string
			if tt.previous {
				j, _ := openT(t, opts)
				firstID = j.InstanceID()
				appendT(t, j, "before", 1)
				if err := j.Close(); err != nil {
					t.Fatal(err)
				}
			}
			filler := fillUp(t, mnt)

			set := metrics.NewSet()
			opts.Metrics = set
			j, segs, err := journal.Open(opts)
			if err != nil {
				t.Fatalf("Open on a full disk: %v", err)
			}
			t.Cleanup(func() { j.Close() })
			next := uint64(1)
			if tt.previous {
				if len(segs) != 1 || segs[0].Records != 1 {
					t.Fatalf("recovered %+v; want segment 1 with its record", segs)
				}
				if got := j.InstanceID(); got != firstID {
					t.Errorf("InstanceID: got %q; want %q from the file", got, firstID)
				}
				next = 2
			} else if _, err := os.Stat(filepath.Join(dir, "instance-id")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("instance-id on a full disk: got %v; want none yet", err)
			}
			id := j.InstanceID()
			if got := j.Current(); got != next {
				t.Errorf("Current: got %d; want %d", got, next)
			}
			if pos, err := j.Append(nil); err != nil || pos.Seq != next {
				t.Errorf("empty Append: got %v, %v; want segment %d, nil", pos, err, next)
			}
			if _, err := j.Append(items("k", 1)); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Append on a full disk: got %v; want ENOSPC", err)
			}
			if got := counter(set, "counterd_journal_append_errors_total"); got != 1 {
				t.Errorf("append errors: got %d; want 1", got)
			}
			if closed, rotated, err := j.Rotate(); err != nil || rotated || closed != next {
				t.Errorf("Rotate with nothing appended: got %d, %v, %v; want %d, false, nil", closed, rotated, err, next)
			}
			if err := j.Seal(); err != nil {
				t.Errorf("Seal: %v", err)
			}
			if tt.previous {
				if err := j.Remove(1); err != nil {
					t.Errorf("Remove of the recovered segment: %v", err)
				}
			}

			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			pos := appendT(t, j, "k", 2)
			if pos.Seq != next {
				t.Errorf("Append after freeing space went to segment %d; want %d", pos.Seq, next)
			}
			if err := j.WaitDurable(t.Context(), pos); err != nil {
				t.Errorf("WaitDurable: %v", err)
			}
			if got := string(readFile(t, filepath.Join(dir, "instance-id"))); got != id {
				t.Errorf("instance-id after the first Append: got %q; want %q", got, id)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}

			j, segs = openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
			if got := j.InstanceID(); got != id {
				t.Errorf("InstanceID after reopen: got %q; want %q", got, id)
			}
			if len(segs) != 1 || segs[0].Seq != next || segs[0].Records != 1 {
				t.Fatalf("recovered %+v; want segment %d with one record", segs, next)
			}
			checkDeltas(t, next, segs[0].Changes, map[string]int64{"k": 2})
		})
	}
}

// A damaged segment that cannot be repaired for want of space is recovered
// all the same and left as it is, to be repaired by a later Open.
func TestRepairOnFullDisk(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "64k")
	dir := filepath.Join(mnt, "journal")
	j, _ := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	appendT(t, j, "a", 1)
	end := appendT(t, j, "b", 1).Offset
	appendT(t, j, "c", 1)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data := readFile(t, segPath(dir, 1))
	data[end-1] ^= 1 // the second record's payload
	writeFile(t, segPath(dir, 1), data)
	filler := fillUp(t, mnt)

	j, segs := openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if s := segs[0]; s.Records != 2 || s.Skipped != 1 || s.Bytes != int64(len(data)) {
		t.Errorf("got %+v; want 2 records, 1 skipped, %d bytes (the file as it is)", s, len(data))
	}
	checkDeltas(t, 1, segs[0].Changes, map[string]int64{"a": 1, "c": 1})
	if got := readFile(t, segPath(dir, 1)); !bytes.Equal(got, data) {
		t.Errorf("segment changed on a full disk: got %x; want %x", got, data)
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "damaged", "*")); len(kept) != 0 {
		t.Errorf("damaged/ holds %v; want nothing after a failed repair", kept)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	_, segs = openT(t, journal.Options{Dir: dir, Fsync: journal.FsyncNo})
	if s := segs[0]; s.Records != 2 || s.Skipped != 1 || s.Bytes >= int64(len(data)) {
		t.Errorf("with space: got %+v; want 2 records, 1 skipped, repaired", s)
	}
	checkDeltas(t, 1, segs[0].Changes, map[string]int64{"a": 1, "c": 1})
}
