package journal_test

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"go.uber.org/goleak"

	"github.com/counterd/counterd/internal/change"
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

// items returns alternating keys and deltas as changes of kind Total.
func items(kv ...any) []change.Change {
	var its []change.Change
	for i := 0; i < len(kv); i += 2 {
		its = append(its, change.Change{Key: kv[i].(string), Kind: change.Total, Delta: int64(kv[i+1].(int))})
	}
	return its
}

func counter(set *metrics.Set, name string) uint64 {
	return set.GetOrCreateCounter(name).Get()
}

func segPath(dir string, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d.seg", seq))
}

// headerSize is the size of a version 2 segment header.
const headerSize = 36

// header is a segment header, spelled out here to pin the file format: a
// version 1 header, or the start of a later one.
func header(magic string, version uint32, seq uint64) []byte {
	h := []byte(magic)
	h = binary.LittleEndian.AppendUint32(h, version)
	return binary.LittleEndian.AppendUint64(h, seq)
}

// header2 is a whole version 2 segment header: header's fields, the
// generation and a CRC-32C of them.
func header2(seq uint64, gen string) []byte {
	h := header("CNTJ", 2, seq)
	g, err := hex.DecodeString(gen)
	if err != nil || len(g) != 16 {
		panic("BUG: bad generation " + gen)
	}
	h = append(h, g...)
	return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, crc32.MakeTable(crc32.Castagnoli)))
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

// deltas returns the net delta of each key in changes of kind Total.
func deltas(changes []change.Change) map[string]int64 {
	m := make(map[string]int64)
	for _, c := range changes {
		if c.Kind != change.Total || c.Bucket != 0 {
			panic(fmt.Sprintf("BUG: change %+v is not a total", c))
		}
		if _, dup := m[c.Key]; dup {
			panic(fmt.Sprintf("BUG: key %q appears twice", c.Key))
		}
		m[c.Key] = c.Delta
	}
	return m
}

// vars returns the summed variance of each key in changes of kind Total.
func vars(changes []change.Change) map[string]float64 {
	m := make(map[string]float64)
	for _, c := range changes {
		m[c.Key] = c.Var
	}
	return m
}

func checkDeltas(t testing.TB, seq uint64, got []change.Change, want map[string]int64) {
	t.Helper()
	if !maps.Equal(deltas(got), want) {
		t.Errorf("segment %d deltas: got %v; want %v", seq, deltas(got), want)
	}
}
