package pending

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"
)

// stuckStore runs out of every attempt's deadline until stuck attempts
// have, then commits as slowStore does; it records how long each
// attempt had.
type stuckStore struct {
	slowStore
	stuck int
	had   []time.Duration
}

func (s *stuckStore) ApplyOnce(ctx context.Context, id store.BatchID, batch []change.Change) (store.ApplyResult, error) {
	dl, _ := ctx.Deadline()
	s.had = append(s.had, time.Until(dl))
	if len(s.had) <= s.stuck {
		<-ctx.Done()
		return store.ApplyResult{}, ctx.Err()
	}
	return s.slowStore.ApplyOnce(ctx, id, batch)
}

// An attempt's deadline fits its round (RoundTimeout plus an allowance a
// change) and doubles after each attempt that ran out of it, so a round
// too big for its first deadline still commits, once. Before, every
// attempt had the same 30 s, and a backlog's round failed for good.
func TestRoundDeadlineGrows(t *testing.T) {
	t.Parallel()
	const base, keys = 200 * time.Millisecond, 1000
	st := &stuckStore{slowStore: slowStore{now: time.Now()}, stuck: 2}
	b := New(st, Options{Interval: time.Hour, RoundTimeout: base})
	for i := range keys {
		if err := b.Add(fmt.Appendf(nil, "k%d", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.flusher.flushAll(context.Background(), false, false); err != nil {
		t.Fatal(err)
	}
	first := base + keys*perChangeAllowance
	want := []time.Duration{first, 2 * first, 4 * first}
	if len(st.had) != len(want) {
		t.Fatalf("attempts: %d (%v); want %d", len(st.had), st.had, len(want))
	}
	for i, had := range st.had {
		// At most its deadline, and more than the one before had in all
		// (a scheduler would have to stall the whole earlier deadline).
		if had > want[i] || i > 0 && had <= want[i-1] {
			t.Errorf("attempt %d had %v; want at most %v and more than %v", i+1, had, want[i], want[max(i-1, 0)])
		}
	}
	if len(st.rounds) != 1 || st.rounds[0] != keys {
		t.Fatalf("committed rounds: %v; want one of %d keys", st.rounds, keys)
	}
	// The growth is bounded.
	if got, want := b.flusher.roundDeadline(keys, 10), 8*first; got != want {
		t.Errorf("deadline after 10 timeouts: %v; want %v", got, want)
	}
}
