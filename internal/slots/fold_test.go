package slots_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"

	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

func slotRows(t *testing.T, db *pgtest.DB) int64 {
	t.Helper()
	var n int64
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM counter_slots`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A pass sweeps the rows that existed when it started and ends while
// writers keep writing, instead of folding their new rows for as long as
// they write; every increment is still counted exactly once.
func TestFoldPassEndsWhileWritersWrite(t *testing.T) {
	t.Parallel()
	// Many more slot rows than the writers hold at once, so a pass that
	// took whatever rows it found would always find more.
	const slotCount, keys, writers = 16, 40, 4
	s, db := newStore(t, slotCount)
	// Writers stop when the pass ends, or at these bounds; reaching either
	// means the pass ran as long as they wrote.
	const maxBatches = 20000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		want    = make(map[string]int64)
		werr    error
		batches int
		done    int // writers that reached a bound
		stop    = make(chan struct{})
		started = make(chan struct{}) // closed once every key has slot rows
	)
	for w := range writers {
		wg.Go(func() {
			for i := range maxBatches {
				select {
				case <-stop:
					return
				default:
				}
				k := (i + w*keys/writers) % keys
				batch := []change.Change{
					{Kind: change.Total, Key: fmt.Sprintf("post:%d", k), Delta: 1},
					{Kind: change.Total, Key: fmt.Sprintf("post:%d", (k+keys/2)%keys), Delta: 2},
				}
				_, err := s.Apply(ctx, batch)
				mu.Lock()
				if err == nil {
					for _, d := range batch {
						want[d.Key] += d.Delta
					}
					if batches++; batches == 2*keys {
						close(started)
					}
				}
				mu.Unlock()
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						werr = errors.Join(werr, err)
						mu.Unlock()
					}
					break
				}
			}
			mu.Lock()
			done++
			mu.Unlock()
		})
	}
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(halt)
	select {
	case <-started:
	case <-ctx.Done():
		halt()
		t.Fatalf("no batch written: %v", werr)
	}

	res, err := s.Fold(ctx, slots.FoldOptions{Chunk: 1})
	mu.Lock()
	ranOut := done
	mu.Unlock()
	halt()
	if ctx.Err() != nil {
		t.Fatalf("the pass or the writers ran into the test's deadline: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if ranOut > 0 {
		t.Fatalf("the pass ended only after %d writers stopped (%+v); want it to end while they write", ranOut, res)
	}
	// One row per chunk: no more chunks than slot rows can exist, plus the
	// one that finds nothing left.
	if res.Chunks > keys*slotCount+1 || res.Rows == 0 {
		t.Fatalf("pass %+v; want 1..%d chunks that folded some rows", res, keys*slotCount+1)
	}
	t.Logf("pass while writing: %+v", res)

	// Quiet now: one pass folds the rest, and every increment is there.
	res, err = s.Fold(ctx, slots.FoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Left != 0 || res.Limited || slotRows(t, db) != 0 {
		t.Fatalf("quiet pass %+v left %d slot rows; want 0", res, slotRows(t, db))
	}
	for k, w := range want {
		if got := total(t, db, k); got != w {
			t.Errorf("%s: got %d; want %d", k, got, w)
		}
	}
}

// MaxDuration ends a pass between chunks, successfully, and says what it
// left for the next.
func TestFoldMaxDuration(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 1)
	ctx := context.Background()
	batch := make([]change.Change, 10)
	for i := range batch {
		batch[i] = change.Change{Kind: change.Total, Key: fmt.Sprintf("k%02d", i), Delta: int64(i + 1)}
	}
	if _, err := s.Apply(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// Every reading of the clock is a minute after the last.
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(time.Minute); return now }

	f := func(opts slots.FoldOptions, want slots.FoldResult) {
		t.Helper()
		got, err := s.Fold(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Fold(%+v): got %+v; want %+v", opts, got, want)
		}
	}
	f(slots.FoldOptions{Chunk: 3, MaxDuration: time.Minute, Clock: clock},
		slots.FoldResult{Rows: 3, Keys: 3, Chunks: 1, Limited: true, Left: 7})
	f(slots.FoldOptions{Chunk: 3, MaxDuration: 2 * time.Minute, Clock: clock},
		slots.FoldResult{Rows: 6, Keys: 6, Chunks: 2, Limited: true, Left: 1})
	f(slots.FoldOptions{Chunk: 3, MaxDuration: time.Minute, Clock: clock},
		slots.FoldResult{Rows: 1, Keys: 1, Chunks: 1, Left: 0})
	for _, d := range batch {
		if got := total(t, db, d.Key); got != d.Delta {
			t.Errorf("%s: got %d; want %d", d.Key, got, d.Delta)
		}
	}
}

// A key whose fold would overflow counters.total holds back only its own
// slot row: every other key folds, and the error names the row.
func TestFoldSkipsRowItCannotFold(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	// Stored counts are numeric and cannot overflow, so the row that
	// cannot be folded is made by a constraint the base row would break.
	exec := func(sql string) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(`ALTER TABLE counters ADD CONSTRAINT b_small CHECK (key <> 'b' OR total < 5)`)
	exec(`INSERT INTO counter_slots (key, slot, count) VALUES
    ('a', 0, 1), ('b', 0, 10), ('b', 1, -10), ('c', 0, 2), ('c', 1, 3), ('d', 0, 4)`)
	res, err := s.Fold(ctx, slots.FoldOptions{Chunk: 2})
	var rowErr *slots.RowError
	if !errors.As(err, &rowErr) || rowErr.Key != "b" || rowErr.Slot != 0 {
		t.Fatalf("Fold: %v; want a RowError for key b slot 0", err)
	}
	if want := (slots.FoldResult{Rows: 5, Keys: 5, Chunks: 4, Skipped: 1, Left: 1}); res != want {
		t.Fatalf("Fold: got %+v; want %+v", res, want)
	}
	f := func(key string, want int64) {
		t.Helper()
		if got := total(t, db, key); got != want {
			t.Errorf("%s: got %d; want %d", key, got, want)
		}
	}
	f("a", 1)
	f("c", 5)
	f("d", 4)
	exec(`ALTER TABLE counters DROP CONSTRAINT b_small`)
	res, err = s.Fold(ctx, slots.FoldOptions{Chunk: 2})
	if err != nil || res.Rows != 1 || res.Left != 0 {
		t.Fatalf("second pass: %+v, %v; want the skipped row folded", res, err)
	}
	f("b", 0)
}
