package hotness_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/hotness"
)

// TestConcurrentCountsEveryIncrement checks that increments racing on one key
// are not lost: with time frozen, 8 goroutines must count what one does.
func TestConcurrentCountsEveryIncrement(t *testing.T) {
	t.Parallel()
	const workers, each = 8, 20000
	key := []byte("post:viral")
	seq, _ := newT(hotness.Options{})
	for range workers * each {
		seq.Observe(key)
	}
	par, _ := newT(hotness.Options{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				par.Observe(key)
			}
		})
	}
	wg.Wait()
	// A few increments may land in the sketch while the key is being let
	// into the hot table; they count for the sketch, not for the key.
	if got, want := par.Rate(key), seq.Rate(key); !within(got, want, 0.001) {
		t.Errorf("Rate after concurrent Observe = %.1f; want %.1f ± 0.1%%", got, want)
	}
}

// TestConcurrentChurn runs observers, decay steps, keys entering and leaving
// a small hot table, and readers all at once, for the race detector.
func TestConcurrentChurn(t *testing.T) {
	t.Parallel()
	const (
		workers = 8
		each    = 20000
		maxHot  = 4
	)
	c, clk := newT(hotness.Options{MaxHot: maxHot, HalfLife: 100 * time.Millisecond})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			buf := make([]byte, 0, 32)
			for i := range each {
				// Half the increments on one key, a quarter on three warm
				// keys, a quarter on keys seen once.
				clk.Advance(25 * time.Microsecond)
				switch {
				case i%2 == 0:
					buf = append(buf[:0], "post:viral"...)
				case i%4 == 1:
					buf = strconv.AppendInt(append(buf[:0], "post:warm"...), int64(i%12), 10)
				default:
					buf = strconv.AppendInt(append(buf[:0], "user:"...), int64(w*each+i), 10)
				}
				if n := c.Observe(buf); n < 1 || n > hotness.DefaultMaxN {
					t.Errorf("Observe = %d; want 1..%d", n, hotness.DefaultMaxN)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			if hot := c.Hot(); len(hot) > maxHot {
				t.Errorf("len(Hot()) = %d; want <= %d", len(hot), maxHot)
			}
			if n := c.HotCount(); n > maxHot {
				t.Errorf("HotCount = %d; want <= %d", n, maxHot)
			}
			c.Rate([]byte("post:viral"))
		}
	})
	wg.Wait()
	// Rates are not checked during the race: with a fake clock running far
	// ahead of real time, a decay step held up by the scheduler spans many
	// fake half-lives and undercounts them. The classifier must recover.
	feed(c, clk, "post:viral", 20000, time.Second)
	if hot := c.Hot(); len(hot) == 0 || hot[0].Key != "post:viral" {
		t.Errorf("Hot() = %+v; want post:viral first", hot)
	}
}
