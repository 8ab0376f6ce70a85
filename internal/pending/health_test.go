package pending

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rotateFailing is a journal whose Rotate fails while fail is set, as it
// does when no descriptor is left for a new segment.
type rotateFailing struct {
	Journal
	fail atomic.Bool
}

var errNoDescriptor = errors.New("open segment: too many open files")

func (j *rotateFailing) Rotate() (uint64, bool, error) {
	if j.fail.Load() {
		return 0, false, errNoDescriptor
	}
	return j.Journal.Rotate()
}

// A round that cannot be cut is not committing: Ready says so, and why,
// until a cut and its write succeed. (Before, only a failed write made
// the daemon unready, and a journal that could not rotate stopped every
// commit while /readyz answered 200.)
func TestReadyReportsCutFailure(t *testing.T) {
	t.Parallel()
	inner, _ := openJournal(t)
	t.Cleanup(func() { inner.Close() })
	jr := &rotateFailing{Journal: inner}
	st := &slowStore{now: time.Now()}
	b := New(st, Options{Journal: jr, Interval: time.Hour})
	ctx := context.Background()
	if err := b.Add([]byte("k"), 1); err != nil {
		t.Fatal(err)
	}
	jr.fail.Store(true)
	if err := b.flusher.flushAll(ctx, true, true); !errors.Is(err, errNoDescriptor) {
		t.Fatalf("flush with rotation failing: got %v; want %v", err, errNoDescriptor)
	}
	err := b.Ready()
	if !errors.Is(err, ErrNotCommitting) || !errors.Is(err, errNoDescriptor) || !strings.Contains(err.Error(), "cannot cut a round") {
		t.Fatalf("Ready with rotation failing: got %v; want it not committing, saying why", err)
	}
	jr.fail.Store(false)
	if err := b.flusher.flushAll(ctx, true, true); err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(); err != nil {
		t.Fatalf("Ready once a round is cut and written: %v", err)
	}
	if len(st.rounds) != 1 || st.rounds[0] != 1 {
		t.Fatalf("committed rounds: %v; want one of 1 key", st.rounds)
	}
}
