package slots_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// TestHomeSlot checks that a writer starts from its home slot: a new key
// gets its row there, and a writer whose every existing row of the key
// is held by another daemon's open round creates its own home row at
// once instead of upserting into a random slot, which waited whenever the
// random slot was one of the held rows.
func TestHomeSlot(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	open := func(home int) *slots.Store {
		s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 16, Home: home})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(5), open(10) // slots 4 and 9
	if a.Home() != 4 || b.Home() != 9 {
		t.Fatalf("homes: got %d, %d; want 4, 9", a.Home(), b.Home())
	}
	rows := func(key string) []int {
		t.Helper()
		r, err := db.Pool.Query(ctx, `SELECT slot FROM counter_slots WHERE key = $1 ORDER BY slot`, key)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for r.Next() {
			var s int
			if err := r.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	inc := func(s *slots.Store, seq uint64, keys ...string) {
		t.Helper()
		var batch []change.Change
		for _, k := range keys {
			batch = append(batch, change.Change{Kind: change.Total, Key: k, Delta: 1})
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		id := store.BatchID{Identity: store.Identity{Instance: "home" + string(rune('a'+s.Home())), Generation: "g1"}, Seq: seq}
		if _, err := s.ApplyOnce(wctx, id, batch); err != nil {
			t.Fatal(err)
		}
	}

	inc(a, 1, "k", "w")
	if got := rows("k"); !slices.Equal(got, []int{4}) {
		t.Fatalf("a new key's rows: got %v; want [4] (the writer's home)", got)
	}
	// b finds a's row free and adds to it: one daemon at a time leaves
	// one row a key.
	inc(b, 1, "w")
	if got := rows("w"); !slices.Equal(got, []int{4}) {
		t.Fatalf("rows after a free row was reused: got %v; want [4]", got)
	}

	// Another daemon's round holds row 4 of k: b creates its home row at
	// once, whatever the lock_timeout.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT 1 FROM counter_slots WHERE key = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	inc(b, 2, "k")
	if got := rows("k"); !slices.Equal(got, []int{4, 9}) {
		t.Fatalf("rows while 4 is held: got %v; want [4 9]", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := total(t, db, "k"); got != 2 {
		t.Fatalf("total of k: got %d; want 2", got)
	}

	// Every row of k held, 9 among them: b's home row exists, so b
	// upserts into another slot; 9 held alone: b adds to a free row
	// (below its home, or the other slot's) and creates none.
	hold := func(slots ...int) (release func()) {
		t.Helper()
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A failure before release must not leave the transaction open:
		// closing the pool would wait for it forever.
		t.Cleanup(func() { tx.Rollback(context.Background()) }) //nolint:errcheck // a no-op after release
		for _, s := range slots {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM counter_slots WHERE key = 'k' AND slot = $1 FOR UPDATE`, s); err != nil {
				t.Fatal(err)
			}
		}
		return func() {
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	release := hold(4, 9)
	inc(b, 3, "k")
	got := rows("k")
	release()
	if len(got) != 3 || !slices.Contains(got, 4) || !slices.Contains(got, 9) {
		t.Fatalf("rows while 4 and 9 are held: got %v; want 4, 9 and one other", got)
	}
	release = hold(9)
	inc(b, 4, "k")
	after := rows("k")
	release()
	if !slices.Equal(after, got) {
		t.Fatalf("rows while 9 is held: got %v; want %v (a free row taken)", after, got)
	}
	var at9 int64
	if err := db.Pool.QueryRow(ctx, `SELECT count FROM counter_slots WHERE key = 'k' AND slot = 9`).Scan(&at9); err != nil {
		t.Fatal(err)
	}
	if at9 != 1 {
		t.Fatalf("row 9 of k: count %d; want 1 (b wrote there only while 4 alone was held)", at9)
	}
	if got := total(t, db, "k"); got != 4 {
		t.Fatalf("total of k: got %d; want 4", got)
	}
}
