package pending_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

// A round that waits to commit longer than it should makes Ready fail,
// naming the round and its attempt, while its first attempt still runs
// (here: waiting for a lock the test holds), and Ready is nil again once
// the round commits. Before, Ready said nothing until an attempt failed,
// up to its 30 s deadline later.
func TestReadyReportsStalledRound(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lock, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx) //nolint:errcheck // released below
	if _, err := lock.Exec(ctx, `LOCK counterd_instances IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	b := pending.New(st, pending.Options{Interval: time.Hour, RoundTimeout: time.Hour, StallAfter: 100 * time.Millisecond})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- b.Run(rctx, pending.DrainAfter(rctx, 10*time.Second)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if err := b.Ready(); err != nil {
		t.Fatalf("Ready before any round: %v", err)
	}
	if err := b.Add([]byte("k"), 1); err != nil {
		t.Fatal(err)
	}
	b.Kick()
	// Wait, with a generous bound, for Ready to say so; nothing fails
	// meanwhile (the attempt has an hour).
	var stalled error
	for deadline := time.Now().Add(time.Minute); stalled == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Ready stayed nil for a minute while the round could not commit")
		}
		stalled = b.Ready()
	}
	if !errors.Is(stalled, pending.ErrNotCommitting) || !strings.Contains(stalled.Error(), "round 1 queued for") ||
		!strings.Contains(stalled.Error(), "attempt 1 still running") {
		t.Fatalf("Ready with the round held: got %v; want it not committing, naming round 1 and its running attempt", stalled)
	}
	// The stall bound is at least StallAfter, so the round has waited
	// longer than that, and counterd_oldest_round_seconds says so.
	if age := b.OldestRound(); age < 100*time.Millisecond {
		t.Fatalf("OldestRound with the round stalled: %s; want at least 100ms", age)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(ctx, time.Minute)
	defer fcancel()
	if err := b.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(); err != nil {
		t.Fatalf("Ready once the round committed: %v", err)
	}
	if age := b.OldestRound(); age != 0 {
		t.Fatalf("OldestRound with nothing queued: %s; want 0", age)
	}
}
