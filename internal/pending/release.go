package pending

import (
	"context"
	"runtime/debug"
	"time"
)

// bigRound is the size of a round past which the memory it took is
// handed back to the operating system once the burst that made it is
// over. A burst of a million distinct keys (PostgreSQL away for a while,
// a backfill) takes hundreds of MB; Go's scavenger returns freed memory
// only gradually, over minutes, and the resident size is what operators
// and OOM killers see.
const bigRound = 100_000

// trimmer is a Store that can drop what its connections keep from
// writing a round (slots.Store.Trim).
type trimmer interface{ Trim(ctx context.Context) }

// afterBurst frees memory at once after a round of keys keys is
// committed, when a big round was committed since the last time and what
// is left is small: under a steady heavy load the memory would be needed
// again at once. Call it once the round is unreachable, or its memory
// cannot be freed. Run's goroutine only.
func (f *Flusher) afterBurst(ctx context.Context, keys int) {
	f.burstKeys = max(f.burstKeys, keys)
	if f.burstKeys < bigRound || f.QueuedRounds() > 0 || f.acc.PendingKeys() > f.burstKeys/10 {
		return
	}
	keys, f.burstKeys = f.burstKeys, 0
	start := time.Now()
	if t, ok := f.store.(trimmer); ok {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		t.Trim(tctx)
		cancel()
	}
	debug.FreeOSMemory()
	f.opts.Logger.Info("burst committed; memory returned to the system", "round_keys", keys, "took", time.Since(start))
}
