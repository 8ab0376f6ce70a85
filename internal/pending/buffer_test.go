package pending_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start runs a Buffer over a real store until the test ends.
func start(t *testing.T, opts pending.Options) (*pending.Buffer, *slots.Store) {
	t.Helper()
	db := pgtest.New(t, pgtest.Options{})
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	b := pending.New(st, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Run(ctx, pending.DrainAfter(ctx, 10*time.Second)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return b, st
}

func TestFlushCommitsEverythingAccepted(t *testing.T) {
	t.Parallel()
	b, st := start(t, pending.Options{Interval: time.Hour})
	ctx := context.Background()
	for i := range 100 {
		if err := b.Add(fmt.Appendf(nil, "k%d", i%10), 2); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.PendingKeys(); got != 10 {
		t.Fatalf("pending keys: got %d; want 10", got)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := st.Totals(ctx, []string{"k0", "k9"})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 20 || got[1] != 20 {
		t.Fatalf("stored after Flush: got %v; want [20 20]", got)
	}
	if b.PendingKeys() != 0 {
		t.Fatalf("pending after Flush: %d; want 0", b.PendingKeys())
	}
}

// Get is exact while rounds commit underneath it: it never counts a
// round both in memory and in the st, or in neither.
func TestGetExactDuringFlushes(t *testing.T) {
	t.Parallel()
	b, _ := start(t, pending.Options{Interval: time.Millisecond})
	ctx := context.Background()
	var added int64
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var addErr error
	wg.Go(func() {
		for i := 0; i < 20000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			if err := b.Add([]byte("hot"), 1); err != nil {
				addErr = err
				mu.Unlock()
				return
			}
			added++
			mu.Unlock()
		}
	})
	for range 200 {
		// Hold adds while reading, so the exact answer is known.
		mu.Lock()
		want := added
		got, err := b.Get(ctx, []string{"hot"})
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != want {
			close(stop)
			wg.Wait()
			t.Fatalf("Get: got %d; want %d", got[0], want)
		}
	}
	close(stop)
	wg.Wait()
	if addErr != nil {
		t.Fatal(addErr)
	}
}

func TestAddRejects(t *testing.T) {
	t.Parallel()
	b := pending.New(nil, pending.Options{MaxPendingKeys: 2})
	f := func(key string, d int64, want error) {
		t.Helper()
		if got := b.Add([]byte(key), d); !errors.Is(got, want) {
			t.Fatalf("Add(%s, %d): got %v; want %v", key, d, got, want)
		}
	}
	f("a", math.MaxInt64, nil)
	f("a", 1, pending.ErrOverflow)
	f("a", -1, nil)
	f("b", math.MinInt64, nil)
	f("b", -1, pending.ErrOverflow)
	f("c", 1, pending.ErrBackoff) // a third key is over the bound
	f("a", 1, nil)                // existing keys still count
	if got := b.PendingKeys(); got != 2 {
		t.Fatalf("pending keys: got %d; want 2", got)
	}
}

func TestFlushTimesOutWhenStoreIsDown(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	db.Pool.Close() // every write now fails
	b := pending.New(st, pending.Options{Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Run(ctx, pending.DrainAfter(ctx, 100*time.Millisecond)) }()
	if err := b.Add([]byte("k"), 1); err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer fcancel()
	if err := b.Flush(fctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with the st down: got %v; want a deadline error", err)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Run: got nil; want an error naming the keys not committed")
	}
}

func BenchmarkAdd(b *testing.B) {
	buf := pending.New(nil, pending.Options{})
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "post:%d", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := buf.Add(keys[i&1023], 1); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
