package journal_test

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"go.uber.org/goleak"

	"github.com/counterd/counterd/internal/journal"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openT opens a journal that is closed when the test ends.
func openT(t testing.TB, opts journal.Options) (*journal.Journal, []journal.Segment) {
	t.Helper()
	j, segs, err := journal.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, segs
}

// appendT appends one record of alternating keys and deltas.
func appendT(t testing.TB, j *journal.Journal, kv ...any) journal.Position {
	t.Helper()
	pos, err := j.Append(items(kv...))
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

func items(kv ...any) []journal.Item {
	var its []journal.Item
	for i := 0; i < len(kv); i += 2 {
		its = append(its, journal.Item{Key: []byte(kv[i].(string)), Delta: int64(kv[i+1].(int))})
	}
	return its
}

func counter(set *metrics.Set, name string) uint64 {
	return set.GetOrCreateCounter(name).Get()
}

func segPath(dir string, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d.seg", seq))
}

// header is a segment header, spelled out here to pin the file format.
func header(magic string, version uint32, seq uint64) []byte {
	h := []byte(magic)
	h = binary.LittleEndian.AppendUint32(h, version)
	return binary.LittleEndian.AppendUint64(h, seq)
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// liveBytes sums the sizes of the segment files in dir up to current: the
// live segments, without the next one prepared ahead of its rotation.
func liveBytes(t testing.TB, dir string, current uint64) int64 {
	t.Helper()
	var n int64
	for seq := uint64(1); seq <= current; seq++ {
		if _, err := os.Stat(segPath(dir, seq)); err == nil {
			n += fileSize(t, segPath(dir, seq))
		}
	}
	return n
}

func checkDeltas(t testing.TB, seq uint64, got, want map[string]int64) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("segment %d deltas: got %v; want %v", seq, got, want)
	}
}
