package hotness_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/hotness"
)

func TestBurstComesAndGoes(t *testing.T) {
	t.Parallel()
	c, clk := newT(hotness.Options{}) // HotRate 1000, CoolRate 500, HalfLife 1s
	key := []byte("post:42")

	// A burst at 10x HotRate: hot well within a second.
	gap := time.Second / 10000
	var became time.Duration
	for t := gap; t <= 2*time.Second; t += gap {
		clk.Advance(gap)
		if c.Observe(key) > 1 && became == 0 {
			became = t
		}
	}
	t.Logf("hot after %v", became)
	if became == 0 || became > time.Second {
		t.Fatalf("became hot after %v of a 10x burst; want within 1s", became)
	}
	if got := c.HotCount(); got != 1 {
		t.Fatalf("HotCount during burst = %d; want 1", got)
	}

	// The burst stops and nobody observes the key again. From ~7500/s (three
	// quarters of the way to 10000/s after two half-lives) it falls below
	// CoolRate after log2(7500/500) = 3.9 half-lives.
	var cooled time.Duration
	for t := time.Duration(0); t < 10*time.Second; t += 100 * time.Millisecond {
		if !isHot(c, "post:42") {
			cooled = t
			break
		}
		clk.Advance(100 * time.Millisecond)
	}
	t.Logf("cooled after %v", cooled)
	if cooled < 3*time.Second || cooled > 5*time.Second {
		t.Fatalf("left Hot() %v after the burst; want between 3s and 5s", cooled)
	}
	if got := c.HotCount(); got != 0 {
		t.Errorf("HotCount after cooling = %d; want 0", got)
	}
	if got := c.Observe(key); got != 1 {
		t.Errorf("Observe after cooling = %d; want 1", got)
	}
}

func TestHotCountWithoutHot(t *testing.T) {
	t.Parallel()
	c, clk := newT(hotness.Options{})
	feed(c, clk, "post:42", 5000, 3*time.Second)
	if got := c.HotCount(); got != 1 {
		t.Fatalf("HotCount = %d; want 1", got)
	}
	clk.Advance(10 * time.Second) // 5000/s decays to ~5/s
	if got := c.HotCount(); got != 0 {
		t.Errorf("HotCount 10 half-lives later = %d; want 0", got)
	}
}

func TestHysteresis(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		coolRate  float64
		minEnters int
		maxEnters int
	}{
		{"default-cool-rate", 0, 1, 1},      // CoolRate 500 < 800: enters once, stays
		{"no-hysteresis", 1000, 5, 1 << 30}, // CoolRate = HotRate: flaps
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, clk := newT(hotness.Options{HotRate: 1000, CoolRate: tc.coolRate})
			enters, hot := 0, false
			for i := range 20 {
				rate := 1200.0
				if i%2 == 1 {
					rate = 800
				}
				gap := time.Duration(float64(time.Second) / rate)
				for t := time.Duration(0); t < 3*time.Second; t += gap {
					clk.Advance(gap)
					now := c.Observe([]byte("post:42")) > 1
					if now && !hot {
						enters++
					}
					hot = now
				}
			}
			t.Logf("entered %d times", enters)
			if enters < tc.minEnters || enters > tc.maxEnters {
				t.Errorf("became hot %d times; want %d..%d", enters, tc.minEnters, tc.maxEnters)
			}
		})
	}
}

func TestColdBesideHot(t *testing.T) {
	t.Parallel()
	c, clk := newT(hotness.Options{Width: hotness.DefaultWidth})
	hot, cold := []byte("post:hot"), []byte("post:cold")
	// 10000/s on hot and 100/s on cold, interleaved over 5s.
	for i := range 50000 {
		clk.Advance(100 * time.Microsecond)
		c.Observe(hot)
		if i%100 == 0 {
			if got := c.Observe(cold); got != 1 {
				t.Fatalf("cold key at %d: N = %d; want 1", i, got)
			}
		}
	}
	got := c.Hot()
	if len(got) != 1 || got[0].Key != "post:hot" || got[0].N < 2 {
		t.Errorf("Hot() = %+v; want only post:hot with N >= 2", got)
	}
	if r := c.Rate(cold); !within(r, 100, 0.1) {
		t.Errorf("Rate(cold) = %.1f; want 100 ± 10%%", r)
	}
}

func TestHotSortedAndBounded(t *testing.T) {
	t.Parallel()
	const maxHot, keys = 8, 20
	c, clk := newT(hotness.Options{MaxHot: maxHot})
	// Key i gets (i+2)*1000 increments/s, all above HotRate; ms by ms.
	for ms := range 2000 {
		clk.Advance(time.Millisecond)
		for i := range keys {
			key := fmt.Appendf(nil, "post:%d", i)
			for range i + 2 {
				c.Observe(key)
			}
		}
		if ms%10 == 0 && len(c.Hot()) > maxHot {
			t.Fatalf("Hot() has more than %d keys", maxHot)
		}
	}
	got := c.Hot()
	var names []string
	for i, h := range got {
		names = append(names, h.Key)
		if i > 0 && h.Rate > got[i-1].Rate {
			t.Errorf("Hot()[%d].Rate = %.0f > Hot()[%d].Rate = %.0f; want hottest first", i, h.Rate, i-1, got[i-1].Rate)
		}
	}
	var want []string
	for i := keys - 1; i >= keys-maxHot; i-- {
		want = append(want, fmt.Sprintf("post:%d", i))
	}
	if !slices.Equal(names, want) {
		t.Errorf("Hot() keys = %v; want %v", names, want)
	}
	if got := c.HotCount(); got != maxHot {
		t.Errorf("HotCount = %d; want %d", got, maxHot)
	}
	// post:0 is above HotRate but cooler than the whole full table: it is
	// turned away and written exactly.
	if got := c.Observe([]byte("post:0")); got != 1 {
		t.Errorf("Observe(post:0) with a full table of hotter keys = %d; want 1", got)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	c := hotness.New(hotness.Options{Every: 1}) // real clock: starts a goroutine; every call counted
	if got := c.Observe([]byte("post:42")); got != 1 {
		t.Errorf("first Observe = %d; want 1", got)
	}
	c.Close()
	c.Close() // idempotent
	// Still usable, on the system clock; TestMain checks the goroutine ended.
	if got := c.Observe([]byte("post:42")); got != 1 {
		t.Errorf("Observe after Close = %d; want 1", got)
	}
	if got := c.Rate([]byte("post:42")); got <= 0 {
		t.Errorf("Rate after Close = %v; want > 0", got)
	}
	hotness.New(hotness.Options{Now: newFakeClock().Now}).Close() // no goroutine: a no-op
}
