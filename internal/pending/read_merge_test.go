package pending_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hll"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
	"github.com/counterd/counterd/internal/windows"
)

// halfCommitted is a buffer whose store splits every round over two
// transactions by lane, over a database that refuses the key "poison"
// while the fault is armed: a round holding it commits the lanes of one
// transaction and stays queued, retried, for the others.
type halfCommitted struct {
	b  *pending.Buffer
	db *pgtest.DB
}

func startHalfCommitted(t *testing.T, opts pending.Options) *halfCommitted {
	t.Helper()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	// A real failure in one transaction: a trigger refuses the poison key
	// while the fault is on.
	for _, sql := range []string{
		`CREATE TABLE fault (armed boolean NOT NULL)`,
		`INSERT INTO fault VALUES (true)`,
		`CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN
		     IF NEW.key = 'poison' AND (SELECT armed FROM fault) THEN
		         RAISE EXCEPTION 'injected failure';
		     END IF;
		     RETURN NEW;
		 END $$`,
		`CREATE TRIGGER refuse_poison BEFORE INSERT ON counter_slots FOR EACH ROW EXECUTE FUNCTION refuse_poison()`,
	} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Writers: 2, SplitAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	opts.Interval = time.Hour
	opts.Metrics = metrics.NewSet()
	b := pending.New(st, opts)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- b.Run(rctx, pending.DrainAfter(rctx, 10*time.Second)) }()
	h := &halfCommitted{b: b, db: db}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(h.disarm) // first, so the drain can commit
	return h
}

// wait flushes until a round has half committed: one transaction's rows
// are in, the poisoned one failed. However slow the machine, every Flush
// times out while the fault is armed. It returns the keys with slot rows.
func (h *halfCommitted) wait(t *testing.T) map[string]bool {
	t.Helper()
	ctx := context.Background()
	for start := time.Now(); ; {
		if time.Since(start) > time.Minute {
			t.Fatal("no transaction of the round committed within a minute")
		}
		fctx, fcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if err := h.b.Flush(fctx); err == nil {
			t.Fatal("Flush with the fault armed: got nil; want a timeout")
		}
		fcancel()
		rows, err := h.db.Pool.Query(ctx, `SELECT DISTINCT key FROM counter_slots`)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]bool{}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			stored[k] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(stored) > 0 {
			return stored
		}
	}
}

// disarm lets the poisoned round commit.
func (h *halfCommitted) disarm() {
	// Cleanup has no t to fail; a failure here shows as the drain's.
	_, _ = h.db.Pool.Exec(context.Background(), `UPDATE fault SET armed = false`)
}

// Every pending read merges a held round only where the store's lane has
// not committed it: while a round is half committed and queued for retry,
// COUNT … SINCE and RANGE (Buckets), TRENDING (Top) and PFCOUNT, also
// with SINCE (Members, BucketMembers), count each change once, whether
// its lane committed (in the store and still held) or not (held only).
func TestReadsExactWithHalfCommittedRound(t *testing.T) {
	t.Parallel()
	h := startHalfCommitted(t, pending.Options{
		Windows: mustWindows(t, "post:*=minute:2h,hour:14d;u:*=hour:3h"),
		Clock:   windows.FuncClock(func() time.Time { return at("2026-03-01T10:30:00Z") }),
	})
	b, ctx := h.b, context.Background()
	// Enough changes for two transactions (one per 2,000).
	posts := make([]string, 1500)
	for i := range posts {
		posts[i] = fmt.Sprintf("post:%d", i)
		incr(t, b, posts[i], int64(i+1))
	}
	incr(t, b, "poison", 1)
	// 5 members each.
	uniques := make([]string, 64)
	var members []change.Change
	for i := range uniques {
		uniques[i] = fmt.Sprintf("u:%d", i)
		for m := range 5 {
			members = append(members, change.Member(uniques[i], uint64(3*i+m)))
		}
	}
	errs := make([]error, len(members))
	if _, err := b.AddGroup(members, errs); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	}

	// The lanes whose transaction committed: a key's totals, buckets and
	// members are written in its lane's.
	committed := map[int]bool{}
	for k := range h.wait(t) {
		committed[store.LaneOf(k)] = true
	}
	// Each kind of read has keys of both kinds of lane, or the checks
	// below would pass on a broken merge.
	for _, keys := range [][]string{posts, uniques} {
		var in int
		for _, k := range keys {
			if committed[store.LaneOf(k)] {
				in++
			}
		}
		if in == 0 || in == len(keys) {
			t.Fatalf("%s…: %d of %d keys in committed lanes; want some, not all", keys[0], in, len(keys))
		}
	}
	lane := func(key string) string {
		l := store.LaneOf(key)
		if committed[l] {
			return fmt.Sprintf("lane %d, committed", l)
		}
		return fmt.Sprintf("lane %d, held only", l)
	}

	check := func(when string) {
		t.Helper()
		bad := map[string]int{} // wrong reads by command, the first 3 shown
		wrong := func(cmd, format string, args ...any) {
			t.Helper()
			if bad[cmd]++; bad[cmd] <= 3 {
				t.Errorf(when+": "+cmd+": "+format, args...)
			}
		}
		for i, key := range posts {
			if i%5 != 0 {
				continue // enough keys of every lane
			}
			for _, k := range []change.Kind{change.Minute, change.Hour} {
				_, got, err := b.Buckets(ctx, key, k, 2)
				if err != nil {
					t.Fatal(err)
				}
				if want := []int64{0, int64(i + 1)}; !slices.Equal(totalsOf(got), want) {
					wrong("COUNT SINCE, RANGE", "%s (%s) %v buckets: got %v; want %v", key, lane(key), k, totalsOf(got), want)
				}
			}
		}
		top, err := b.Top(ctx, "post:", change.Hour, 1, len(posts)+1)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]pending.KeyTotal, len(posts))
		for i, key := range posts {
			want[i] = pending.KeyTotal{Key: key, Total: int64(i + 1)}
		}
		slices.SortFunc(want, func(x, y pending.KeyTotal) int { return cmp.Compare(y.Total, x.Total) })
		if !slices.Equal(top, want) {
			for i := range min(len(top), len(want)) {
				if top[i] != want[i] {
					wrong("TRENDING", "place %d: got %v (%s); want %v", i, top[i], lane(top[i].Key), want[i])
					break
				}
			}
			if len(top) != len(want) {
				wrong("TRENDING", "%d keys; want %d", len(top), len(want))
			}
		}
		for _, key := range uniques {
			st, held, err := b.Members(ctx, change.Unique, []string{key})
			if err != nil {
				t.Fatal(err)
			}
			if got := union(t, st[0], held[0]); got != 5 {
				wrong("PFCOUNT", "%s (%s): got %d; want 5", key, lane(key), got)
			}
			st, held, err = b.BucketMembers(ctx, change.Hour, []string{key}, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := union(t, st[0], held[0]); got != 5 {
				wrong("PFCOUNT SINCE", "%s (%s): got %d; want 5", key, lane(key), got)
			}
		}
		if len(bad) > 0 {
			t.Fatalf("%s: reads wrong, by command: %v", when, bad)
		}
	}
	check("half committed")
	h.disarm()
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check("committed")
}

// union counts the distinct members of a stored sketch (nil: none) and
// held members, as PFCOUNT does.
func union(t *testing.T, stored []byte, held []int64) uint64 {
	t.Helper()
	u := hll.NewDefault()
	if stored != nil {
		sk, err := hll.Parse(stored)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.Union(sk); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range held {
		u.Add(uint64(h))
	}
	return u.Estimate()
}
