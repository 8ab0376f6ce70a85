package journal_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"golang.org/x/sys/unix"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
)

// mountTmpfs mounts a tmpfs of the given size on a new directory until the
// test ends, or skips the test where that is impossible.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

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
