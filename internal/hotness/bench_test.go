package hotness_test

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/counterd/counterd/internal/hotness"
)

// distinctKeys returns n distinct keys laid out one after another, as keys
// fresh from a connection's read buffer are: in cache, so that the benchmarks
// measure the classifier rather than misses on the keys themselves.
func distinctKeys(n int) [][]byte {
	arena := make([]byte, 0, n*16)
	keys := make([][]byte, n)
	for i := range keys {
		start := len(arena)
		arena = strconv.AppendInt(append(arena, "post:"...), int64(i), 10)
		keys[i] = arena[start:len(arena):len(arena)]
	}
	return keys
}

// BenchmarkObserveCold observes 1M distinct keys on the real clock, so each
// is cold; the table must stay empty or the numbers measure the slow path.
func BenchmarkObserveCold(b *testing.B) {
	c := benchCold(b, observe)
	b.StopTimer()
	b.ReportMetric(float64(c.HotCount()), "hot")
}

func observe(c *hotness.Classifier, key []byte) { c.Observe(key) }

// benchCold calls observe on 1M distinct keys from every goroutine, each
// starting elsewhere in the list.
func benchCold(b *testing.B, observe func(*hotness.Classifier, []byte)) *hotness.Classifier {
	keys := distinctKeys(1 << 20)
	c := hotness.New(hotness.Options{})
	b.Cleanup(c.Close)
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1 << 18) // each goroutine starts elsewhere
		for pb.Next() {
			observe(c, keys[i&(1<<20-1)])
			i++
		}
	})
	return c
}

// BenchmarkObserveHot observes one key from every goroutine: it is hot from
// the first ~100µs on, and every goroutine contends for its counter.
func BenchmarkObserveHot(b *testing.B) {
	c := benchHot(b, observe)
	b.StopTimer()
	b.ReportMetric(float64(c.HotCount()), "hot")
}

// benchHot calls observe on one key from every goroutine.
func benchHot(b *testing.B, observe func(*hotness.Classifier, []byte)) *hotness.Classifier {
	c := hotness.New(hotness.Options{})
	b.Cleanup(c.Close)
	key := []byte("post:42")
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			observe(c, key)
		}
	})
	return c
}

// BenchmarkObserveColdSerial is BenchmarkObserveCold on one goroutine: the
// cost of one call without contention.
func BenchmarkObserveColdSerial(b *testing.B) {
	keys := distinctKeys(1 << 20)
	c := hotness.New(hotness.Options{})
	defer c.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c.Observe(keys[i&(1<<20-1)])
	}
}

// BenchmarkDecayStep measures one decay pass over a full default sketch: the
// pause paid, once per HalfLife/16, by whichever Observe notices the step.
func BenchmarkDecayStep(b *testing.B) {
	c, clk := newT(hotness.Options{Width: hotness.DefaultWidth})
	key := make([]byte, 0, 32)
	for i := range 200000 {
		c.Observe(strconv.AppendInt(append(key[:0], "post:"...), int64(i), 10))
	}
	step := hotness.DefaultHalfLife / 16
	b.ReportAllocs()
	for b.Loop() {
		clk.Advance(step)
		c.HotCount() // runs the step
	}
}

// BenchmarkHot measures listing a full hot table.
func BenchmarkHot(b *testing.B) {
	c, clk := newT(hotness.Options{Width: hotness.DefaultWidth})
	keys := distinctKeys(hotness.DefaultMaxHot)
	for range 4000 { // 0.4s at ~10k/s per key
		for _, k := range keys {
			clk.Advance(100)
			c.Observe(k)
		}
	}
	if got := c.HotCount(); got != hotness.DefaultMaxHot {
		b.Fatalf("HotCount = %d; want %d", got, hotness.DefaultMaxHot)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Hot()
	}
}

// BenchmarkTallyCold is BenchmarkObserveCold through Tally, the call for
// keys that are never sampled: three calls in four (default Every) return
// after a random number.
func BenchmarkTallyCold(b *testing.B) { benchCold(b, (*hotness.Classifier).Tally) }

// BenchmarkTallyHot is BenchmarkObserveHot through Tally.
func BenchmarkTallyHot(b *testing.B) { benchHot(b, (*hotness.Classifier).Tally) }
