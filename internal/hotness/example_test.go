package hotness_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/counterd/counterd/internal/hotness"
)

// A connection handler asks for the sampling factor of every increment and
// writes +n with probability 1/n: a hot key costs about Target writes a
// second whatever its rate, and its expected total stays exact.
func Example() {
	clk := newFakeClock()
	rng := rand.New(rand.NewPCG(1, 2))
	// Production: Options{} and defer c.Close(). A fixed clock and random
	// source (which picks the one call in Every that is counted) make the
	// output repeatable.
	c := hotness.New(hotness.Options{Now: clk.Now, Rand: rng.Uint64})
	key := []byte("post:42")
	written := 0
	for range 30000 { // 10,000 increments/s for 3s
		clk.Advance(100 * time.Microsecond)
		if n := c.Observe(key); n == 1 || rng.IntN(n) == 0 {
			written++ // record +n
		}
	}
	hot := c.Hot()
	fmt.Printf("%s: %.0f/s, N=%d, under 10%% written: %v\n",
		hot[0].Key, hot[0].Rate, hot[0].N, written < 3000)
	// Output: post:42: 8700/s, N=87, under 10% written: true
}
