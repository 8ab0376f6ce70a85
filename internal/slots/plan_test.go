package slots_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/store"

	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

// A new deployment's first statistics describe a one-row slot table. A
// plan cached from them scanned the whole table for every key of every
// later round; the write must plan for the table as it is (index lookups,
// no sequential scan however many rounds ran before).
func TestApplyPlansForTheTableAsItGrows(t *testing.T) {
	t.Parallel()
	// One backend, so its pending statistics can be flushed on demand.
	db := pgtest.New(t, pgtest.Options{MaxConns: 1})
	s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Writers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	round := func(seq int, batch []change.Change) {
		t.Helper()
		if _, err := s.ApplyOnce(ctx, store.BatchID{Identity: store.Identity{Instance: "p"}, Seq: uint64(seq)}, batch); err != nil {
			t.Fatal(err)
		}
	}
	seqScans := func() int64 {
		t.Helper()
		exec(`SELECT pg_stat_force_next_flush()`)
		var n int64
		err := db.Pool.QueryRow(ctx, `SELECT seq_scan FROM pg_stat_user_tables WHERE relid = 'counter_slots'::regclass`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	seq := 0
	for range 8 {
		seq++
		round(seq, []change.Change{{Kind: change.Total, Key: "hot", Delta: 1}})
	}
	exec(`ANALYZE counter_slots`)
	for range 8 { // more than the five runs after which a generic plan is cached
		seq++
		round(seq, []change.Change{{Kind: change.Total, Key: "hot", Delta: 1}})
	}
	exec(`INSERT INTO counter_slots (key, slot, count) SELECT 'k' || g, 0, 1 FROM generate_series(1, 20000) AS g`)

	batch := make([]change.Change, 500)
	for i := range batch {
		batch[i] = change.Change{Kind: change.Total, Key: fmt.Sprintf("k%d", i+1), Delta: 1}
	}
	before := seqScans()
	seq++
	round(seq, batch)
	if got := seqScans() - before; got != 0 {
		t.Fatalf("sequential scans of counter_slots during a round: got %d; want 0 (a plan made for the one-row table)", got)
	}
	if got := total(t, db, "k500"); got != 2 {
		t.Fatalf("k500: got %d; want 2", got)
	}
}
