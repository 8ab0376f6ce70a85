package slots_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// onceAt is a view of key by visitor at t0+offset with an 8h window.
func onceAt(key, visitor string, offset time.Duration) change.Change {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	return change.OnceView(key, change.VisitorHash([]byte(visitor)), t0.Add(offset), 8*time.Hour)
}

// sameMicro is n views netted into c's cell.
func sameMicro(c change.Change, n int64) change.Change {
	c.Delta = n
	return c
}

// INCRONCE's rule, round by round and within one round: repeats inside
// the window count once, a view at the window counts again, and the
// window slides from the last counted view only (a repeat at window-1s
// does not extend it). A replayed round decides nothing again.
func TestOnceDecides(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	id := store.BatchID{Identity: store.Identity{Instance: "once"}}
	apply := func(cs ...change.Change) {
		t.Helper()
		id.Seq++
		mustApply(t, s, id, cs...)
	}
	const w = 8 * time.Hour
	for _, step := range []struct {
		name  string
		views []change.Change
		want  int64 // total of "p" after the step
	}{
		{"first view", []change.Change{onceAt("p", "u1", 0)}, 1},
		{"repeat inside", []change.Change{onceAt("p", "u1", time.Minute)}, 1},
		{"repeat at window-1s", []change.Change{onceAt("p", "u1", w-time.Second)}, 1},
		{"at the window from the counted view", []change.Change{onceAt("p", "u1", w)}, 2},
		{"another visitor", []change.Change{onceAt("p", "u2", w)}, 3},
		// One round, out of order: w+1m does not count after w; 2w
		// counts; 2w+1s not; 3w counts.
		{"one round", []change.Change{
			onceAt("p", "u1", 3*w), onceAt("p", "u1", w+time.Minute), onceAt("p", "u1", 2*w+time.Second),
			onceAt("p", "u1", 2*w), onceAt("q", "u1", 2*w)}, 5},
		// Three views of one visitor in one microsecond net to one cell
		// of 3 views (the kind adds up): decided as one view.
		{"one microsecond", []change.Change{sameMicro(onceAt("p", "u4", 0), 3)}, 6},
	} {
		apply(step.views...)
		if got := total(t, db, "p"); got != step.want {
			t.Fatalf("%s: total of p: got %d; want %d", step.name, got, step.want)
		}
	}
	if got := total(t, db, "q"); got != 1 {
		t.Fatalf("total of q: got %d; want 1 (keys are apart)", got)
	}
	// The round replayed: its lanes are done, nothing is decided again.
	res, err := s.ApplyOnce(context.Background(), id, []change.Change{onceAt("p", "u3", 0), onceAt("p", "u1", 10*w)})
	if err != nil {
		t.Fatal(err)
	}
	if got := total(t, db, "p"); got != 6 || !res.Duplicate {
		t.Fatalf("replayed round: total %d (%+v); want 6, duplicate", got, res)
	}
}

// Views decided late, after a later view of the visitor counted (a daemon
// that replayed its journal after an outage), are decided as they would
// have been in accept-time order, against the last counted view and the
// one before it: the total comes out as in order, except for a view older
// than both, which is not counted (erring low). Before, every late view
// was dropped: at - last is negative, which the rule read as "within the
// window". A late view that counts leaves the row's prune time alone.
func TestOnceDecidesLate(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	id := store.BatchID{Identity: store.Identity{Instance: "late"}}
	const w = 8 * time.Hour
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		name string
		at   time.Duration
		want int64
	}{
		{"a view at 2w", 2 * w, 1},
		{"late, at 0: 2w before the last, none before it", 0, 2},
		{"late, at w/2: within the window after the one at 0", w / 2, 2},
		{"late, at w: a window after 0 and before 2w", w, 3},
		{"late, at 1.5w: within the window before the last", w + w/2, 3},
		{"in order, at 3w", 3 * w, 4},
		{"late, before the view before last: not decided, not counted", -w, 4},
	} {
		id.Seq++
		mustApply(t, s, id, onceAt("p", "u5", step.at))
		if got := total(t, db, "p"); got != step.want {
			t.Fatalf("%s: total of p: got %d; want %d", step.name, got, step.want)
		}
	}
	var keep time.Time
	if err := db.Pool.QueryRow(context.Background(), `SELECT keep_until FROM counter_seen WHERE key = 'p'`).Scan(&keep); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(4 * w); !keep.Equal(want) {
		t.Errorf("keep_until: got %v; want %v (the last counted view, 3w, plus its window)", keep, want)
	}
}

// Two stores (two daemons) deciding views of the same visitors at once
// count each visitor once.
func TestOnceExactAcrossStores(t *testing.T) {
	t.Parallel()
	s1, db := newStore(t, 4)
	s2, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	const visitors, rounds = 50, 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for d, s := range []*slots.Store{s1, s2} {
		wg.Go(func() {
			for r := range rounds {
				var cs []change.Change
				for v := range visitors {
					cs = append(cs, onceAt("k", string(rune('a'+v%26))+string(rune('a'+v/26)), time.Duration(d*rounds+r)*time.Second))
				}
				id := store.BatchID{Identity: store.Identity{Instance: string(rune('x' + d))}, Seq: uint64(r + 1)}
				if _, err := s.ApplyOnce(context.Background(), id, cs); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := total(t, db, "k"); got != visitors {
		t.Fatalf("total: got %d; want %d (one per visitor)", got, visitors)
	}
}

// The rollup's prune deletes entries whose window ended before the time
// it is given (an hour ago here), and a view after that counts.
func TestPruneSeen(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	now := time.Now()
	mustApply(t, s, store.BatchID{Identity: store.Identity{Instance: "p"}, Seq: 1},
		change.OnceView("old", 1, now.Add(-10*time.Hour), 8*time.Hour),
		change.OnceView("recent", 1, now.Add(-8*time.Hour), 8*time.Hour))
	n, err := s.PruneSeen(ctx, now.Add(-time.Hour), 1)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, _ := db.Pool.Query(ctx, `SELECT key FROM counter_seen ORDER BY key`)
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		left = append(left, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 1 || len(left) != 1 || left[0] != "recent" {
		t.Fatalf("pruned %d, left %v; want 1 pruned, [recent] left", n, left)
	}
}

// The visitor hash docs/sql.md computes in SQL is the one counterd
// stores.
func TestVisitorHashMatchesSQL(t *testing.T) {
	t.Parallel()
	_, db := newStore(t, 1)
	for _, v := range []string{"user:7", "203.0.113.9", "ü", "a longer visitor id, with spaces"} {
		var got int64
		err := db.Pool.QueryRow(context.Background(),
			`SELECT ('x' || left(encode(sha256(convert_to($1, 'UTF8')), 'hex'), 16))::bit(64)::bigint`, v).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		if want := change.VisitorHash([]byte(v)); got != want {
			t.Errorf("hash of %q: SQL %d; Go %d", v, got, want)
		}
	}
}

// A counted view renews its key's idle expiry (COUNTERD_KEY_TTL) as an
// increment does; a view that does not count writes nothing to it.
func TestOnceRenewsKeyTTL(t *testing.T) {
	t.Parallel()
	_, db := newStore(t, 4)
	s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4, KeyTTL: func(string) time.Duration { return time.Hour }})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, store.BatchID{Identity: store.Identity{Instance: "ttl"}, Seq: 1}, onceAt("p", "u1", 0))
	var idle time.Duration
	if err := db.Pool.QueryRow(context.Background(), `SELECT extract(epoch FROM idle)::bigint * 1000000000 FROM counter_expiry WHERE key = 'p'`).Scan(&idle); err != nil {
		t.Fatalf("idle expiry of p: %v", err)
	}
	if idle != time.Hour {
		t.Fatalf("idle expiry of p: %v; want 1h", idle)
	}
}
