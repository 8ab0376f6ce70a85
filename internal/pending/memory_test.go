package pending_test

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/counterd/counterd/internal/pending"
)

// BenchmarkPendingMemory reports the heap that a million distinct pending
// keys (post:0 .. post:999999) hold, per key, once accepted and before
// their round is written: the map entry, the key's bytes and its cell.
func BenchmarkPendingMemory(b *testing.B) {
	const keys = 1_000_000
	names := make([][]byte, keys)
	for i := range names {
		names[i] = strconv.AppendInt([]byte("post:"), int64(i), 10)
	}
	var perKey float64
	for range b.N {
		before := heapInUse()
		buf := pending.New(nil, pending.Options{})
		for _, k := range names {
			if err := buf.Add(k, 1); err != nil {
				b.Fatal(err)
			}
		}
		perKey = float64(heapInUse()-before) / keys
		if got := buf.PendingKeys(); got != keys {
			b.Fatalf("pending keys: got %d; want %d", got, keys)
		}
		runtime.KeepAlive(buf)
	}
	b.ReportMetric(perKey, "B/key")
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
