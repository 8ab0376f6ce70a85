package hotness_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/counterd/counterd/internal/hotness"
)

// TestManyDistinctKeys is not parallel: it measures the whole process's heap.
func TestManyDistinctKeys(t *testing.T) {
	n := 10_000_000
	if testing.Short() || raceEnabled {
		n = 250_000 // the race detector makes this loop ~40x slower
	}
	c, clk := newT(hotness.Options{Width: hotness.DefaultWidth})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	// 1M increments/s in total, each key once: a cold key's true rate is ~0,
	// so any N > 1 would be a collision false positive.
	buf := make([]byte, 0, 32)
	hot := 0
	for i := range n {
		clk.Advance(time.Microsecond)
		buf = strconv.AppendInt(append(buf[:0], "user:"...), int64(i), 10)
		if c.Observe(buf) > 1 {
			hot++
		}
	}

	runtime.GC()
	runtime.ReadMemStats(&after)
	if hot != 0 {
		t.Errorf("%d of %d distinct keys were hot; want 0", hot, n)
	}
	if got := c.HotCount(); got != 0 {
		t.Errorf("HotCount = %d; want 0", got)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 1<<20 {
		t.Errorf("heap grew by %d bytes over %d keys; want < 1 MiB", grew, n)
	}
	if got := c.Rate([]byte("user:12345")); got > 200 {
		t.Errorf("Rate of a key seen once = %.0f; want far below HotRate", got)
	}
	runtime.KeepAlive(c)
}

// TestObserveAllocs is not parallel: AllocsPerRun counts every goroutine's
// allocations.
func TestObserveAllocs(t *testing.T) {
	c, clk := newT(hotness.Options{})
	feed(c, clk, "post:hot", 5000, 3*time.Second)
	cold := []byte("post:cold")
	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"cold", cold},
		{"hot", []byte("post:hot")},
	} {
		got := testing.AllocsPerRun(1000, func() {
			clk.Advance(100 * time.Microsecond)
			c.Observe(tc.key)
		})
		if got != 0 {
			t.Errorf("%s: Observe allocates %v times; want 0", tc.name, got)
		}
	}
}

// TestBytes pins the default footprint that the package doc states, and
// checks that the rest scales as sketch cells, entries and index slots.
func TestBytes(t *testing.T) {
	t.Parallel()
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the documented footprint is for 64-bit platforms")
	}
	f := func(opts hotness.Options) int {
		opts.Now = newFakeClock().Now
		return hotness.New(opts).Bytes()
	}
	def := f(hotness.Options{})
	if want := 614_872; def != want {
		t.Errorf("default Bytes = %d; want %d, as the package doc says", def, want)
	}
	// 8-byte cells, 64-byte entries plus a pointer each, and an index of
	// 8-byte slots at most half full (2048 for 1024 entries, 32 for 16).
	small := f(hotness.Options{Width: 1024, Depth: 2, MaxHot: 16})
	if want := def - (16384*4-1024*2)*8 - (1024-16)*(64+8) - (2048-32)*8; small != want {
		t.Errorf("Bytes of a 1024x2 sketch with MaxHot 16 = %d; want %d", small, want)
	}
}
