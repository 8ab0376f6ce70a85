package tickets_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/bench/internal/tickets"
	"github.com/counterd/counterd/internal/pgtest"
)

// long bounds runs that end when the tickets are drawn; it is never
// reached unless something is broken.
const long = time.Minute

func setup(t *testing.T, conns int32) *pgtest.DB {
	t.Helper()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: conns})
	if err := tickets.Setup(context.Background(), db.Pool); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestEveryApproachDrawsEachTicketOnce draws all of an owner's tickets
// from concurrent clients: each ticket once, the other owner's untouched.
func TestEveryApproachDrawsEachTicketOnce(t *testing.T) {
	t.Parallel()
	for _, a := range tickets.SQL() {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			db := setup(t, 10)
			ctx := context.Background()
			res, err := tickets.RunSQL(ctx, db.Pool, a, tickets.Load{Owner: 10, Tickets: 150, Clients: 8, Duration: long})
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != 0 || res.Draws != 150 || res.Duplicates != 0 || res.Left != 0 || !res.Consistent() {
				t.Fatalf("errors %d (%v) draws %d duplicates %d left %d marked %d; want 0, 150, 0, 0, 150",
					res.Errors, res.Err, res.Draws, res.Duplicates, res.Left, res.Marked)
			}
			switch a.Name {
			case tickets.SkipLocked.Name:
				if res.Failures != 0 || res.Retries != 0 {
					t.Fatalf("failures %d retries %d; want none", res.Failures, res.Retries)
				}
			case tickets.Ordered.Name:
				if res.Failures != 0 {
					t.Fatalf("failures %d; want none (it retries)", res.Failures)
				}
			}
			if other, err := tickets.Left(ctx, db.Pool, 11); err != nil || other != 150 {
				t.Fatalf("the other owner has %d undrawn (%v); want 150", other, err)
			}
			t.Logf("%s: %d retries, %d failures", a.Name, res.Retries, res.Failures)
		})
	}
}

// holdFirst locks owner's first ticket in a transaction of its own, as a
// concurrent draw that has not committed yet does; mark also marks it
// drawn there.
func holdFirst(t *testing.T, db *pgtest.DB, owner int64, mark bool) (pgx.Tx, int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	var id int64
	q := `SELECT id FROM ` + tickets.Table + ` WHERE owner = $1 AND remain = 1 ORDER BY id LIMIT 1 FOR UPDATE`
	if mark {
		q = `UPDATE ` + tickets.Table + ` SET remain = 0 WHERE id = (SELECT min(id) FROM ` + tickets.Table + ` WHERE owner = $1) RETURNING id`
	}
	if err := tx.QueryRow(ctx, q, owner).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return tx, id
}

// TestOrderedRetriesAfterLosingARace: while another draw holds the first
// ticket, the ordered draw picks it too and waits; once that draw
// commits, the update finds the ticket gone, and the draw retries and
// gets the second ticket: one retry, counted.
func TestOrderedRetriesAfterLosingARace(t *testing.T) {
	t.Parallel()
	db := setup(t, 4)
	ctx := context.Background()
	if err := tickets.Fill(ctx, db.Pool, 1, 3); err != nil {
		t.Fatal(err)
	}
	all, err := tickets.Undrawn(ctx, db.Pool, 1)
	if err != nil {
		t.Fatal(err)
	}
	tx, first := holdFirst(t, db, 1, true)
	c, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	pid := c.Conn().PgConn().PID()
	type result struct{ id, retries int64 }
	done := make(chan result, 1)
	errc := make(chan error, 1)
	go func() {
		id, retries, err := tickets.Ordered.Drawer(c.Conn(), 1)(ctx)
		if err != nil {
			errc <- err
			return
		}
		done <- result{id, retries}
	}()
	waitForLock(t, db, pid)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	case got := <-done:
		if first != all[0] || got.id != all[1] || got.retries != 1 {
			t.Fatalf("drew %d after %d retries (first %d held); want %d after 1", got.id, got.retries, first, all[1])
		}
	}
}

// TestSkipLockedPassesAHeldTicket: while another draw holds the first
// ticket, the single statement takes the second at once.
func TestSkipLockedPassesAHeldTicket(t *testing.T) {
	t.Parallel()
	db := setup(t, 4)
	ctx := context.Background()
	if err := tickets.Fill(ctx, db.Pool, 5, 3); err != nil {
		t.Fatal(err)
	}
	all, err := tickets.Undrawn(ctx, db.Pool, 5)
	if err != nil {
		t.Fatal(err)
	}
	holdFirst(t, db, 5, false)
	c, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	id, retries, err := tickets.SkipLocked.Drawer(c.Conn(), 5)(ctx)
	if err != nil || id != all[1] || retries != 0 {
		t.Fatalf("drew %d, %d retries, %v; want %d, 0, nil", id, retries, err, all[1])
	}
}

// TestDrawOfNothing: an owner without tickets gets 0 from every approach,
// and a run over no tickets draws none.
func TestDrawOfNothing(t *testing.T) {
	t.Parallel()
	db := setup(t, 4)
	ctx := context.Background()
	c, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	for _, a := range tickets.SQL() {
		if id, _, err := a.Drawer(c.Conn(), 99)(ctx); err != nil || id != 0 {
			t.Errorf("%s: drew %d, %v; want 0, nil", a.Name, id, err)
		}
	}
	c.Release()
	res, err := tickets.RunSQL(ctx, db.Pool, tickets.SkipLocked, tickets.Load{Owner: 99, Tickets: 0, Clients: 2, Duration: long})
	if err != nil || res.Draws != 0 || res.Failures != 0 || !res.Consistent() {
		t.Fatalf("draws %d failures %d (%v); want none", res.Draws, res.Failures, err)
	}
}

// waitForLock returns once backend pid waits on a lock.
func waitForLock(t *testing.T, db *pgtest.DB, pid uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var waiting bool
		err := db.Pool.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, int32(pid)).Scan(&waiting)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the draw never waited for the held ticket")
		}
	}
}
