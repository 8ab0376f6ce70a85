package slots_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// memberRows counts key's member rows, and its rows of any kind (a
// removed member or a cleared set leaves none).
func memberRows(t *testing.T, db *pgtest.DB, key string) (members, rows int64) {
	t.Helper()
	err := db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE added_at IS NOT NULL), count(*) FROM counter_set_members WHERE key = $1`, key).Scan(&members, &rows)
	if err != nil {
		t.Fatal(err)
	}
	return members, rows
}

// A DEL of a set (its Set and its clear, one journal record) in the same
// round as operations accepted before and after it: those before are
// decided (their replies) and undone by the clear, those after apply to
// the empty set; the total and the member rows agree.
func TestSetClearInRound(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	id := store.BatchID{Identity: store.Identity{Instance: "c"}}
	const key = "post:1:likes"
	op := func(m string, tok int64, add bool) change.Change { return change.SetOpChange(key, []byte(m), tok, add) }
	id.Seq++
	mustApply(t, s, id, op("a", 1, true), op("b", 2, true), op("c", 3, true))
	id.Seq++
	dAdd, aRem, eAdd := op("d", 10, true), op("a", 13, false), op("e", 12, true)
	res, err := s.ApplyOnce(context.Background(), id, []change.Change{
		dAdd, {Key: key, Kind: change.Set}, change.SetClearChange(key, 11), eAdd, aRem,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		c    change.Change
		want int64
	}{{dAdd, 1}, {eAdd, 1}, {aRem, 0}} {
		if got, ok := res.Outcomes[change.OpID(w.c)]; !ok || got != w.want {
			t.Errorf("outcome of %+v: %d, %v; want %d", w.c, got, ok, w.want)
		}
	}
	if m, rows := memberRows(t, db, key); m != 1 || rows != 2 {
		t.Fatalf("%d members in %d rows; want e alone, and the tombstone of a's SREM", m, rows)
	}
	if got := total(t, db, key); got != 1 {
		t.Fatalf("total %d; want 1", got)
	}
	// A DEL of a key that is no set, and of a set key never written.
	id.Seq++
	mustApply(t, s, id, change.Change{Key: "views", Kind: change.Total, Delta: 5})
	id.Seq++
	mustApply(t, s, id, change.Change{Key: "views", Kind: change.Set}, change.SetClearChange("views", 20),
		change.Change{Key: "nothing", Kind: change.Set}, change.SetClearChange("nothing", 21))
	if got := total(t, db, "views"); got != 0 {
		t.Fatalf("views total %d after DEL; want 0", got)
	}
}

// A DEL of a set while another daemon adds and removes its members: the
// DEL's Set and clear hold the key's set lock exclusive, rounds deciding
// its members hold it shared, so the total the DEL replaces and the rows
// it deletes are the same set, and afterwards the total equals the
// member rows. Without the lock a member committed between the DEL's
// read of the total and its delete of the rows left them apart.
func TestSetClearRacingOperations(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	open := func() *slots.Store {
		s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const key, adders, rounds, dels = "post:2:likes", 3, 60, 20
	var wg sync.WaitGroup
	for a := range adders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := open()
			id := store.BatchID{Identity: store.Identity{Instance: fmt.Sprintf("adder-%d", a)}}
			for i := range rounds {
				id.Seq++
				tok := int64(1_000_000*(a+1) + i)
				cs := []change.Change{
					change.SetOpChange(key, fmt.Appendf(nil, "u%d-%d", a, i), tok, true),
					change.SetOpChange(key, fmt.Appendf(nil, "u%d-%d", a, i/2), tok+1, i%3 == 0),
				}
				if _, err := s.ApplyOnce(context.Background(), id, cs); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := open()
		id := store.BatchID{Identity: store.Identity{Instance: "deleter"}}
		for i := range dels {
			id.Seq++
			if _, err := s.ApplyOnce(context.Background(), id, []change.Change{
				{Key: key, Kind: change.Set}, change.SetClearChange(key, int64(10_000_000+i)),
			}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	m, rows := memberRows(t, db, key)
	if got := total(t, db, key); got != m || rows < m {
		t.Fatalf("total %d, %d members in %d rows; want the total to equal the members", got, m, rows)
	}
}

// A set whose expiry passed starts a new life, members and total
// together: its next round decides against the empty set (as INCR of an
// expired key counts from 0), and the rollup's expiry deletes its member
// rows with its total. Before, the total reset and the members stayed.
func TestSetExpiry(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	id := store.BatchID{Identity: store.Identity{Instance: "x"}}
	apply := func(cs ...change.Change) store.ApplyResult {
		t.Helper()
		id.Seq++
		res, err := s.ApplyOnce(ctx, id, cs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	add := func(key, m string, tok int64) change.Change { return change.SetOpChange(key, []byte(m), tok, true) }
	apply(add("k1", "a", 1), add("k1", "b", 2), add("k2", "a", 3), add("k2", "b", 4))
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counter_expiry (key, expires_at) VALUES ('k1', now() - interval '1 second'), ('k2', now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	// The store has seen no expiry yet: this round, of another set, finds
	// one exists (a set whose expiry is the store's first is renewed by
	// its next round: docs/protocol.md, Exact sets).
	apply(add("k3", "x", 5))
	again := add("k1", "a", 10)
	if res := apply(again, add("k1", "c", 11)); res.Outcomes[change.OpID(again)] != 1 {
		t.Fatalf("SADD of a member of the expired set: outcome %d; want 1 (new in the new life)", res.Outcomes[change.OpID(again)])
	}
	if m, rows := memberRows(t, db, "k1"); m != 2 || rows != 2 || total(t, db, "k1") != 2 {
		t.Fatalf("k1 after its new life's first round: %d members in %d rows, total %d; want 2, 2, 2", m, rows, total(t, db, "k1"))
	}
	if _, err := s.Expire(ctx, slots.ExpireOptions{}); err != nil {
		t.Fatal(err)
	}
	if m, rows := memberRows(t, db, "k2"); m != 0 || rows != 0 || total(t, db, "k2") != 0 {
		t.Fatalf("k2 after the rollup's expiry: %d members in %d rows, total %d; want none", m, rows, total(t, db, "k2"))
	}
}

// A set whose expiry passed reads empty before anything resets it, as
// its total reads 0.
func TestSetExpiredReadsEmpty(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	mustApply(t, s, store.BatchID{Identity: store.Identity{Instance: "r"}, Seq: 1}, change.SetOpChange("k", []byte("a"), 1, true))
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counter_expiry (key, expires_at) VALUES ('k', now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	if ms, err := s.SetMembers(ctx, "k", nil, 10); err != nil || len(ms) != 0 {
		t.Fatalf("members of the expired set: %q, %v; want none", ms, err)
	}
	var in bool
	if err := db.Pool.QueryRow(ctx, `SELECT counter_set_contains('k', 'a')`).Scan(&in); err != nil || in {
		t.Fatalf("counter_set_contains of the expired set: %v, %v; want false", in, err)
	}
}
