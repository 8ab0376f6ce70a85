package slots_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"

	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

func newStore(t *testing.T, n int) (*slots.Store, *pgtest.DB) {
	t.Helper()
	db := pgtest.New(t, pgtest.Options{})
	s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: n})
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

func total(t *testing.T, db *pgtest.DB, key string) int64 {
	t.Helper()
	var n int64
	err := db.Pool.QueryRow(context.Background(), `SELECT coalesce((SELECT total FROM counter_totals WHERE key = $1), 0)`, key).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestApplyOneHotKey(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 8)
	ctx := context.Background()
	const workers, per = 32, 60
	var (
		mu                sync.Mutex
		updated, inserted int
		wg                sync.WaitGroup
		firstErr          error
	)
	for range workers {
		wg.Go(func() {
			for range per {
				res, err := s.Apply(ctx, []change.Change{{Kind: change.Total, Key: "post:hot", Delta: 1}})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				updated += res.Updated
				inserted += res.Inserted
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if got, want := total(t, db, "post:hot"), int64(workers*per); got != want {
		t.Fatalf("total: got %d; want %d", got, want)
	}
	if got, want := updated+inserted, workers*per; got != want {
		t.Fatalf("rows written: got %d updated + %d inserted; want %d in all", updated, inserted, want)
	}
	var rows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counter_slots WHERE key = 'post:hot'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows < 2 || rows > 8 {
		t.Fatalf("slot rows: got %d; want 2..8 (spread over slots, bounded by Slots)", rows)
	}
	if inserted != rows {
		t.Fatalf("inserted: got %d; want %d (one per slot row)", inserted, rows)
	}
	t.Logf("updated %d, inserted %d, slot rows %d", updated, inserted, rows)
}

func TestApplySpreadKeys(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	const workers, batches, keys = 32, 20, 300
	want := make([]int64, keys)
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range batches {
				seen := map[int]bool{}
				var batch []change.Change
				for range 40 {
					k := rng.IntN(keys)
					if seen[k] {
						continue
					}
					seen[k] = true
					n := rng.Int64N(7) - 2 // some unlikes
					batch = append(batch, change.Change{Kind: change.Total, Key: fmt.Sprintf("post:%d", k), Delta: n})
					mu.Lock()
					want[k] += n
					mu.Unlock()
				}
				if _, err := s.Apply(ctx, batch); err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	names := make([]string, keys)
	for k := range keys {
		names[k] = fmt.Sprintf("post:%d", k)
	}
	got, err := s.Totals(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s: got %d; want %d", names[k], got[k], want[k])
		}
		if v := total(t, db, names[k]); k%37 == 0 && v != want[k] {
			t.Errorf("counter_totals %s: got %d; want %d", names[k], v, want[k])
		}
	}
}

// A key whose total passes int64 never makes a write fail, so it never
// holds back other keys; reading it as an int64 is an error for that key
// only, and it comes back into range exactly.
func TestApplyOverflow(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 1)
	ctx := context.Background()
	apply := func(batch []change.Change) {
		t.Helper()
		if _, err := s.Apply(ctx, batch); err != nil {
			t.Fatalf("Apply(%v): %v", batch, err)
		}
	}
	apply([]change.Change{{Kind: change.Total, Key: "big", Delta: math.MaxInt64 - 1}})
	apply([]change.Change{{Kind: change.Total, Key: "big", Delta: 1}, {Kind: change.Total, Key: "other", Delta: 5}})
	apply([]change.Change{{Kind: change.Total, Key: "big", Delta: math.MaxInt64}, {Kind: change.Total, Key: "other", Delta: 5}})
	if _, err := s.Totals(ctx, []string{"big"}); !errors.Is(err, store.ErrOverflow) {
		t.Fatalf("Totals(big) beyond int64: got %v; want store.ErrOverflow", err)
	}
	if got, want := total(t, db, "other"), int64(10); got != want {
		t.Fatalf("other: got %d; want %d", got, want)
	}
	var null bool
	if err := db.Pool.QueryRow(ctx, `SELECT total IS NULL FROM counter_totals WHERE key = 'big'`).Scan(&null); err != nil || !null {
		t.Fatalf("counter_totals for a total beyond int64: null %v, err %v; want NULL", null, err)
	}
	if _, err := s.Fold(ctx, slots.FoldOptions{}); err != nil {
		t.Fatalf("fold a total beyond int64: %v", err)
	}
	var over string
	if err := db.Pool.QueryRow(ctx, `SELECT total::text FROM counter_overflows WHERE key = 'big'`).Scan(&over); err != nil || over != "18446744073709551614" {
		t.Fatalf("counter_overflows: got %q, %v; want 18446744073709551614", over, err)
	}
	apply([]change.Change{{Kind: change.Total, Key: "big", Delta: -math.MaxInt64}})
	if got, want := total(t, db, "big"), int64(math.MaxInt64); got != want {
		t.Fatalf("big back in range: got %d; want %d", got, want)
	}
}

func TestFoldRacingWriters(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const workers, batches, keys = 8, 60, 20
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		want     = make(map[string]int64)
		firstErr error
	)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for range batches {
				k := fmt.Sprintf("post:%d", rng.IntN(keys))
				k2 := fmt.Sprintf("post:%d", keys+rng.IntN(keys))
				batch := []change.Change{{Kind: change.Total, Key: k, Delta: 3}, {Kind: change.Total, Key: k2, Delta: 1}}
				_, err := s.Apply(ctx, batch)
				mu.Lock()
				if err != nil {
					firstErr = errors.Join(firstErr, err)
				} else {
					want[k] += 3
					want[k2]++
				}
				mu.Unlock()
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	// Fold with tiny chunks for as long as the writers run, and at least
	// five times.
	var folds int
	var foldErr error
	for stop := false; !stop || folds < 5; {
		select {
		case <-finished:
			stop = true
		default:
		}
		if _, err := s.Fold(ctx, slots.FoldOptions{Chunk: 7}); err != nil {
			foldErr = err
			<-finished
			break
		}
		folds++
	}
	if firstErr != nil || foldErr != nil {
		t.Fatal(errors.Join(firstErr, foldErr))
	}
	if _, err := s.Fold(ctx, slots.FoldOptions{}); err != nil {
		t.Fatal(err)
	}
	var slotRows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counter_slots`).Scan(&slotRows); err != nil {
		t.Fatal(err)
	}
	if slotRows != 0 {
		t.Fatalf("slot rows after a quiet fold: got %d; want 0", slotRows)
	}
	for k, w := range want {
		if got := total(t, db, k); got != w {
			t.Errorf("%s: got %d; want %d", k, got, w)
		}
	}
	t.Logf("%d fold passes raced the writers", folds)
}

// PruneInstances deletes the identity rows (one per lane) of generations
// that have not committed since the cutoff. (That a round applied twice
// counts once is the conformance suite's ExactlyOnce.)
func TestPruneInstances(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, 4)
	ctx := context.Background()
	for _, id := range []store.BatchID{
		{Identity: store.Identity{Instance: "a"}, Seq: 1},
		{Identity: store.Identity{Instance: "b"}, Seq: 1},
		{Identity: store.Identity{Instance: "a"}, Seq: 3},
	} {
		if _, err := s.ApplyOnce(ctx, id, []change.Change{{Kind: change.Total, Key: "post:1", Delta: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if seq, err := s.LastSeq(ctx, store.Identity{Instance: "a"}); err != nil || seq != 3 {
		t.Fatalf("LastSeq(a): got %d, %v; want 3", seq, err)
	}
	if n, err := s.PruneInstances(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("PruneInstances before any commit: got %d, %v; want 0", n, err)
	}
	if n, err := s.PruneInstances(ctx, time.Now().Add(time.Hour)); err != nil || n != 2*store.Lanes {
		t.Fatalf("PruneInstances: got %d, %v; want %d (a row per lane of a and b)", n, err, 2*store.Lanes)
	}
}

// A round some of whose lanes committed before a crash is replayed, by a
// daemon that groups lanes into transactions differently, and every key
// still counts once.
func TestApplyOnceReplaysPartlyCommittedRound(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	st := func(writers int) *slots.Store {
		s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Writers: writers, SplitAlways: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Enough keys that 3 writers each get a transaction.
	batch := func() []change.Change {
		var b []change.Change
		for k := range 6000 {
			b = append(b, change.Change{Kind: change.Total, Key: fmt.Sprintf("post:%d", k), Delta: int64(k + 1)})
		}
		return b
	}
	// The crashed daemon (4 writers) committed round 5 of lane 3 only:
	// lane 3's keys are written and every other lane is still at round 4.
	id := store.BatchID{Identity: store.Identity{Instance: "x"}, Seq: 5}
	var lane3 []change.Change
	for _, d := range batch() {
		if store.LaneOf(d.Key) == 3 {
			lane3 = append(lane3, d)
		}
	}
	if len(lane3) == 0 {
		t.Fatal("no key of the batch is in lane 3")
	}
	if _, err := st(4).ApplyOnce(ctx, id, lane3); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE counterd_instances SET last_seq = 4 WHERE instance <> 'x/3'`); err != nil {
		t.Fatal(err)
	}
	if seq, err := st(4).LastSeq(ctx, store.Identity{Instance: "x"}); err != nil || seq != 4 {
		t.Fatalf("LastSeq before the replay: got %d, %v; want 4", seq, err)
	}

	for _, writers := range []int{3, 1} {
		res, err := st(writers).ApplyOnce(ctx, id, batch())
		if err != nil {
			t.Fatal(err)
		}
		if want := writers == 1; res.Duplicate != want {
			t.Fatalf("replay with %d writers: duplicate %v; want %v", writers, res.Duplicate, want)
		}
	}
	var names []string
	for _, d := range batch() {
		names = append(names, d.Key)
	}
	got, err := st(1).Totals(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range batch() {
		if got[i] != d.Delta {
			t.Errorf("%s: got %d; want %d", d.Key, got[i], d.Delta)
		}
	}
	if seq, err := st(2).LastSeq(ctx, store.Identity{Instance: "x"}); err != nil || seq != 5 {
		t.Fatalf("LastSeq after the replay: got %d, %v; want 5", seq, err)
	}
}

// Batch identities recorded before lanes existed (one row per instance)
// still say which rounds were committed.
func TestLastSeqFallsBackToInstanceRow(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counterd_instances (instance, last_seq) VALUES ('old', 7)`); err != nil {
		t.Fatal(err)
	}
	if seq, err := s.LastSeq(ctx, store.Identity{Instance: "old"}); err != nil || seq != 7 {
		t.Fatalf("LastSeq(old): got %d, %v; want 7", seq, err)
	}
	if _, err := s.ApplyOnce(ctx, store.BatchID{Identity: store.Identity{Instance: "old"}, Seq: 8}, []change.Change{{Kind: change.Total, Key: "k", Delta: 1}}); err != nil {
		t.Fatal(err)
	}
	if seq, err := s.LastSeq(ctx, store.Identity{Instance: "old"}); err != nil || seq != 8 {
		t.Fatalf("LastSeq(old) after round 8: got %d, %v; want 8", seq, err)
	}
	if seq, err := s.LastSeq(ctx, store.Identity{Instance: "never"}); err != nil || seq != 0 {
		t.Fatalf("LastSeq(never): got %d, %v; want 0", seq, err)
	}
}

// A round split over writers by lane may leave a writer no key (here,
// 2,000 keys all in even lanes with two writers): that writer's
// transaction still records the round in its lanes. Before, building its
// statement panicked and took the daemon down.
func TestApplyOnceWriterWithNoKeys(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Writers: 2, SplitAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var batch []change.Change
	for i := 0; len(batch) < 2000; i++ {
		if k := fmt.Sprintf("even:%d", i); store.LaneOf(k)%2 == 0 {
			batch = append(batch, change.Change{Key: k, Kind: change.Total, Delta: 1})
		}
	}
	id := store.BatchID{Identity: store.Identity{Instance: "w", Generation: "g"}, Seq: 1}
	if _, err := s.ApplyOnce(ctx, id, batch); err != nil {
		t.Fatal(err)
	}
	if seq, err := s.LastSeq(ctx, id.Identity); err != nil || seq != 1 {
		t.Fatalf("LastSeq: got %d, %v; want 1 in every lane", seq, err)
	}
	if got := total(t, db, batch[0].Key); got != 1 {
		t.Fatalf("%s: got %d; want 1", batch[0].Key, got)
	}
}
