package pending

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/windows"
)

// Accepting groups through several shards gives the replies and the rounds
// of accepting them one after another into one map: random groups of
// small and int64-edge increments, SETs, DELs and EXPIREs on a few keys,
// each sent through a random shard (or AddAll), checked change by change
// against a buffer without shards, with cuts in between, live and after
// replaying both journals.
func TestShardsMatchOneMap(t *testing.T) {
	t.Parallel()
	win, err := windows.Parse("*=minute:2h")
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(40) {
		for _, w := range []*windows.Config{nil, win} {
			t.Run(fmt.Sprintf("seed=%d/windows=%v", seed, w != nil), func(t *testing.T) {
				t.Parallel()
				testShardsMatchOneMap(t, seed, w)
			})
		}
	}
}

func testShardsMatchOneMap(t *testing.T, seed uint64, win *windows.Config) {
	rng := rand.New(rand.NewPCG(seed, 7))
	open := func(shards int) (*Buffer, *journal.Journal, string) {
		jr, dir := openJournal(t)
		opts := Options{Journal: jr, Identity: store.Identity{Instance: "i", Generation: "g"}, Shards: shards}
		if win != nil {
			opts.Windows = win
			opts.Clock = windows.FuncClock(func() time.Time { return time.Unix(1772359200, 0) })
		}
		return New(nil, opts), jr, dir
	}
	one, jr1, dir1 := open(0)
	many, jr3, dir3 := open(3)
	keys := []string{"a", "b", "c"}
	value := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return math.MaxInt64 - rng.Int64N(3)
		case 1:
			return math.MinInt64 + rng.Int64N(3)
		case 2:
			return math.MaxInt64/3 + rng.Int64N(1<<20) - 1<<19
		}
		return rng.Int64N(201) - 100
	}
	for step := range 300 {
		g := make([]change.Change, 1+rng.IntN(4))
		for i := range g {
			k := keys[rng.IntN(len(keys))]
			switch rng.IntN(10) {
			case 0:
				g[i] = set(k, value())
			case 1:
				g[i] = set(k, 0) // DEL
			case 2:
				g[i] = expire(k, rng.Int64N(3)*1_800_000_000)
			default:
				g[i] = incr(k, value())
			}
		}
		all := rng.IntN(8) == 0
		errs1, errs3 := make([]error, len(g)), make([]error, len(g))
		var err1, err3 error
		if all {
			_, err1 = one.AddAll(g, errs1)
			_, err3 = many.AddAll(g, errs3)
		} else {
			_, err1 = one.AddGroup(g, errs1)
			if sh := rng.IntN(4); sh == 3 {
				_, err3 = many.AddGroup(g, errs3)
			} else {
				_, err3 = many.Shard(sh).AddGroup(g, errs3)
			}
		}
		if err1 != err3 || !slices.Equal(errs1, errs3) {
			t.Fatalf("step %d, group %v: one map answered %v %v; shards %v %v", step, g, err1, errs1, err3, errs3)
		}
		if rng.IntN(20) == 0 || step == 299 {
			cut1, err := one.acc.Cut()
			if err != nil {
				t.Fatal(err)
			}
			cut3, err := many.acc.Cut()
			if err != nil {
				t.Fatal(err)
			}
			if cut1 != cut3 {
				t.Fatalf("step %d: one map cut %v, shards %v", step, cut1, cut3)
			}
		}
	}
	rounds := func(b *Buffer) [][]change.Change {
		var out [][]change.Change
		for _, r := range b.flusher.rounds {
			out = append(out, sortedAll(r.batch()))
		}
		return out
	}
	want, got := rounds(one), rounds(many)
	if !slices.EqualFunc(want, got, slices.Equal) {
		t.Fatalf("rounds differ:\none map %v\nshards  %v", want, got)
	}
	replay := func(jr *journal.Journal, dir string) [][]change.Change {
		return rounds(New(nil, Options{Recovered: replayJournal(t, jr, dir)}))
	}
	if r := replay(jr3, dir3); !slices.EqualFunc(got, r, slices.Equal) {
		t.Fatalf("shards' journal replays as %v; live rounds were %v", r, got)
	}
	if r := replay(jr1, dir1); !slices.EqualFunc(want, r, slices.Equal) {
		t.Fatalf("one map's journal replays as %v; live rounds were %v", r, want)
	}
}

// Shards accepting at once while rounds are cut: every round holds
// exactly the records of its journal segment (replay gives the same
// rounds), and the rounds add up to what was accepted. Run with -race.
func TestShardsConcurrentCuts(t *testing.T) {
	t.Parallel()
	jr, dir := openJournal(t)
	b := New(nil, Options{Journal: jr, Identity: store.Identity{Instance: "i", Generation: "g"}, Shards: 4})
	const workers, groups = 5, 400
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			g := make([]change.Change, 3)
			errs := make([]error, len(g))
			for i := range groups {
				for j := range g {
					g[j] = incr(fmt.Sprintf("k%d", (i+j)%7), int64(w+1))
				}
				var err error
				switch {
				case w == workers-1 && i%2 == 0:
					_, err = b.AddAll(g, errs)
				case w == workers-1:
					_, err = b.AddGroup(g, errs)
				default:
					_, err = b.Shard(w).AddGroup(g, errs)
				}
				if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
					t.Errorf("worker %d group %d: %v %v", w, i, err, errs)
					return
				}
			}
		})
	}
	stop, cuts := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(cuts)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := b.acc.Cut(); err != nil {
				t.Error(err)
				return
			}
			b.inMemory(change.Plain(), []string{"k1"}) // a read takes every lock too
		}
	}()
	wg.Wait()
	close(stop)
	<-cuts
	if _, err := b.acc.Cut(); err != nil {
		t.Fatal(err)
	}
	var live [][]change.Change
	sums := map[string]int64{}
	for _, r := range b.flusher.rounds {
		batch := sortedAll(r.batch())
		live = append(live, batch)
		for _, c := range batch {
			sums[c.Key] += c.Delta
		}
	}
	want := int64(0)
	for w := range workers {
		want += int64(w+1) * groups * 3
	}
	total := int64(0)
	for _, n := range sums {
		total += n
	}
	if total != want {
		t.Fatalf("rounds add up to %d; accepted %d", total, want)
	}
	var replayed [][]change.Change
	for _, rec := range replayJournal(t, jr, dir) {
		// One round per segment, as each was cut.
		r := New(nil, Options{Recovered: []Recovered{rec}})
		replayed = append(replayed, sortedAll(r.flusher.rounds[0].batch()))
	}
	if !slices.EqualFunc(live, replayed, slices.Equal) {
		t.Fatalf("%d live rounds differ from the %d replayed segments", len(live), len(replayed))
	}
}

// At the pending-key limit a key pending in another shard is still
// accepted (the exclusive path finds it and counts it once) and a new
// key is refused, as with one map.
func TestShardsPendingKeyLimit(t *testing.T) {
	t.Parallel()
	b := New(nil, Options{MaxPendingKeys: 2, Shards: 2})
	add := func(sh Shard, key string) error {
		errs := make([]error, 1)
		if _, err := sh.AddGroup([]change.Change{incr(key, 1)}, errs); err != nil {
			t.Fatal(err)
		}
		return errs[0]
	}
	for _, step := range []struct {
		shard int
		key   string
		want  error
	}{
		{0, "a", nil}, {1, "b", nil}, {1, "a", nil}, {0, "b", nil}, {0, "c", ErrBackoff}, {1, "c", ErrBackoff}, {1, "a", nil},
	} {
		if err := add(b.Shard(step.shard), step.key); err != step.want {
			t.Fatalf("shard %d, key %s: got %v; want %v", step.shard, step.key, err, step.want)
		}
	}
	if n := b.PendingKeys(); n != 2 {
		t.Errorf("PendingKeys = %d; want 2", n)
	}
	if _, err := b.acc.Cut(); err != nil {
		t.Fatal(err)
	}
	got := sortedAll(b.flusher.rounds[0].batch())
	if want := []change.Change{incr("a", 3), incr("b", 2)}; !slices.Equal(got, want) {
		t.Errorf("round: got %v; want %v", got, want)
	}
}

// sortedAll sorts a round's changes by counter.
func sortedAll(b []change.Change) []change.Change {
	slices.SortFunc(b, func(x, y change.Change) int { return compareID(x.ID(), y.ID()) })
	return b
}

// BenchmarkAddPass accepts what one event-loop pass carries (a group of
// 16 increments, one journal record) from GOMAXPROCS goroutines at once:
// through the shared shard, as before the accept path was sharded, and
// through a shard per goroutine, as the event loops do. Compare the two
// in one run.
func BenchmarkAddPass(b *testing.B) {
	for _, own := range []bool{false, true} {
		b.Run(fmt.Sprintf("own_shard=%v", own), func(b *testing.B) {
			jr, _, err := journal.Open(journal.Options{Dir: b.TempDir(), Fsync: journal.FsyncEverySec, MaxBytes: 1 << 40})
			if err != nil {
				b.Fatal(err)
			}
			defer jr.Close()
			buf := New(nil, Options{Journal: jr, Shards: runtime.GOMAXPROCS(0)})
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := int(next.Add(1))
				add := buf.AddGroup
				if own {
					add = buf.Shard(w).AddGroup
				}
				items := make([]change.Change, 16)
				errs := make([]error, len(items))
				keys := make([]string, 4096)
				for i := range keys {
					keys[i] = fmt.Sprintf("post:%d:%d", w, i)
				}
				i := 0
				for pb.Next() {
					for j := range items {
						items[j] = change.Change{Key: keys[(i*16+j)&4095], Kind: change.Total, Delta: 1}
					}
					if _, err := add(items, errs); err != nil {
						b.Fatal(err)
					}
					if i++; i%4096 == 0 {
						cutAndDrop(b, buf)
					}
				}
			})
			b.ReportMetric(float64(b.N*16)/b.Elapsed().Seconds(), "incr/s")
		})
	}
}

// cutAndDrop cuts a round and throws every queued round away with its
// journal segments, as if committed: a benchmark's flusher.
func cutAndDrop(b *testing.B, buf *Buffer) {
	if _, err := buf.acc.Cut(); err != nil {
		b.Fatal(err)
	}
	f := buf.flusher
	f.mu.Lock()
	rounds := f.rounds
	f.rounds = nil
	f.mu.Unlock()
	for _, r := range rounds {
		if err := buf.acc.jr.Remove(r.id.Seq); err != nil {
			b.Fatal(err)
		}
	}
}
