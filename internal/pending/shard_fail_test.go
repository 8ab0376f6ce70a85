package pending

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/store"
)

// failingJournal fails its failAt-th AppendRecord with journal.ErrFull.
type failingJournal struct {
	Journal
	mu     sync.Mutex
	n      int
	failAt int
}

func (j *failingJournal) AppendRecord(rec []byte, n int) (journal.Position, error) {
	j.mu.Lock()
	j.n++
	fail := j.n == j.failAt
	j.mu.Unlock()
	if fail {
		return journal.Position{}, fmt.Errorf("append: %w", journal.ErrFull)
	}
	return j.Journal.AppendRecord(rec, n)
}

// A group accepted in pieces whose journal write fails part-way answers
// the failed piece and everything after it with the journal's error, and
// holds nothing of them in memory; the pieces before it stay accepted.
// (The failed piece's items were once answered as accepted and lost.)
func TestGroupInPiecesJournalFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		max    int
		before []change.Change // accepted first (one record)
		group  []change.Change
		failAt int     // the AppendRecord that fails, counting before's
		want   []error // per item of group: nil or the journal's error
	}{
		// pieces: a (fast, record 1), SET b (exclusive, 2), c (fast, 3 fails)
		{"last fast piece fails", 0, nil, []change.Change{incr("a", 1), set("b", 5), incr("c", 7)}, 3,
			[]error{nil, nil, journal.ErrFull}},
		// pieces: a (fast, 1), SET b (exclusive, 2 fails), c not tried
		{"exclusive piece fails", 0, nil, []change.Change{incr("a", 1), set("b", 5), incr("c", 7)}, 2,
			[]error{nil, journal.ErrFull, journal.ErrFull}},
		// at the key limit: a (fast, 2), x (exclusive, BUSY: no record), c (fast, 3 fails)
		{"after a refused key", 2, []change.Change{incr("a", 1), incr("c", 1)}, []change.Change{incr("a", 1), incr("x", 1), incr("c", 1)}, 3,
			[]error{nil, ErrBackoff, journal.ErrFull}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			jr, _ := openJournal(t)
			defer jr.Close()
			b := New(nil, Options{Journal: &failingJournal{Journal: jr, failAt: tc.failAt},
				Identity: store.Identity{Instance: "i", Generation: "g"}, Shards: 1, MaxPendingKeys: tc.max})
			if tc.before != nil {
				errs := make([]error, len(tc.before))
				if _, err := b.Shard(0).AddGroup(tc.before, errs); err != nil || errors.Join(errs...) != nil {
					t.Fatal(err, errs)
				}
			}
			errs := make([]error, len(tc.group))
			if _, err := b.Shard(0).AddGroup(tc.group, errs); err != nil {
				t.Fatalf("AddGroup: %v; want per-item errors (an earlier piece was accepted)", err)
			}
			want := map[string]int64{}
			for _, ch := range tc.before {
				want[ch.Key] += ch.Delta
			}
			for i, ch := range tc.group {
				if !errors.Is(errs[i], tc.want[i]) || (tc.want[i] == nil) != (errs[i] == nil) {
					t.Errorf("item %d (%v): got %v; want %v", i, ch, errs[i], tc.want[i])
				}
				if errs[i] == nil {
					want[ch.Key] = ch.Delta + want[ch.Key]*boolInt(ch.Kind != change.Set)
				}
			}
			if _, err := b.acc.Cut(); err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, ch := range b.flusher.rounds[0].batch() {
				got[ch.Key] = ch.Delta
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("round holds %v; want %v (what was answered as accepted)", got, want)
			}
		})
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// gatedJournal holds its first AppendRecord, inside the caller's shard
// lock, until release: that group is between its check and its fold.
type gatedJournal struct {
	Journal
	once             sync.Once
	arrived, release chan struct{}
}

func (j *gatedJournal) AppendRecord(rec []byte, n int) (journal.Position, error) {
	j.once.Do(func() {
		close(j.arrived)
		<-j.release
	})
	return j.Journal.AppendRecord(rec, n)
}

// Two shards checking new keys at once cannot pass MaxPendingKeys
// together: keys are reserved atomically at check time. (Each used to
// compare the shared count, which grew only at fold, and both accepted.)
func TestShardsReserveKeysAtOnce(t *testing.T) {
	t.Parallel()
	jr, _ := openJournal(t)
	defer jr.Close()
	gj := &gatedJournal{Journal: jr, arrived: make(chan struct{}), release: make(chan struct{})}
	const limit = 3
	b := New(nil, Options{Journal: gj, Identity: store.Identity{Instance: "i", Generation: "g"}, Shards: 2, MaxPendingKeys: limit})
	group := func(w int) []change.Change {
		g := make([]change.Change, limit)
		for i := range g {
			g[i] = incr(fmt.Sprintf("w%d-k%d", w, i), 1)
		}
		return g
	}
	doneA := make(chan error, 1)
	errsA := make([]error, limit)
	go func() {
		_, err := b.Shard(0).AddGroup(group(0), errsA)
		doneA <- err
	}()
	<-gj.arrived // A checked its keys and holds its shard's lock
	sb := b.Shard(1).s
	errsB := make([]error, limit)
	sb.mu.Lock()
	_, accepted, _, stop := b.acc.check(sb, group(1), errsB, false)
	reserved := sb.reserved
	sb.mu.Unlock()
	b.acc.keys.Add(-reserved) // B's check is not folded
	close(gj.release)
	if err := <-doneA; err != nil || errors.Join(errsA...) != nil {
		t.Fatal(err, errsA)
	}
	if accepted != 0 || stop != 0 {
		t.Fatalf("a second shard accepted %d new keys (stopped at %d) while the first's %d were between check and fold; MaxPendingKeys = %d", accepted, stop, limit, limit)
	}
	if n := b.PendingKeys(); n != limit {
		t.Fatalf("PendingKeys = %d; want %d", n, limit)
	}
}

// cutDuringJournal starts a Cut during its first AppendRecord and returns
// only once that Cut holds shard 0's lock, so the Cut runs between the
// caller's fast-path piece and any exclusive piece after it. It records
// the positions WaitDurable is asked for.
type cutDuringJournal struct {
	Journal
	b      *Buffer
	once   sync.Once
	cut    chan error
	waited []journal.Position
}

func (j *cutDuringJournal) AppendRecord(rec []byte, n int) (journal.Position, error) {
	pos, err := j.Journal.AppendRecord(rec, n)
	j.once.Do(func() {
		go func() {
			_, err := j.b.acc.Cut()
			j.cut <- err
		}()
		home := j.b.acc.shards[0]
		for home.mu.TryLock() { // until the Cut holds it
			home.mu.Unlock()
			runtime.Gosched()
		}
	})
	return pos, err
}

func (j *cutDuringJournal) WaitDurable(ctx context.Context, pos journal.Position) error {
	j.waited = append(j.waited, pos)
	return j.Journal.WaitDurable(ctx, pos)
}

// A group whose pieces a round cut separates waits for the durability of
// every segment it wrote to, not only the last (under fsync=always a
// failed fsync is reported per segment).
func TestGroupInPiecesAcrossCutWaitsForEverySegment(t *testing.T) {
	t.Parallel()
	jr, _ := openJournal(t)
	defer jr.Close()
	cj := &cutDuringJournal{Journal: jr, cut: make(chan error, 1)}
	b := New(nil, Options{Journal: cj, Identity: store.Identity{Instance: "i", Generation: "g"}, Shards: 1})
	cj.b = b
	g := []change.Change{incr("a", 1), set("b", 5)} // a fast piece, then an exclusive one
	errs := make([]error, len(g))
	tk, err := b.Shard(0).AddGroup(g, errs)
	if err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	if err := <-cj.cut; err != nil {
		t.Fatal(err)
	}
	if err := b.WaitDurable(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	segs := map[uint64]bool{}
	for _, p := range cj.waited {
		segs[p.Seq] = true
	}
	if len(segs) != 2 {
		t.Fatalf("WaitDurable waited on %v; want a position in each of the two segments the group wrote to", cj.waited)
	}
}
