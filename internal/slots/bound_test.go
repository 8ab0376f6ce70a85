package slots_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// widestArray records the most elements any array parameter of a
// statement had.
type widestArray struct {
	mu    sync.Mutex
	most  int
	query string
}

func (w *widestArray) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	for _, a := range data.Args {
		v := reflect.ValueOf(a)
		if v.Kind() != reflect.Slice || v.Type().Elem().Kind() == reflect.Uint8 {
			continue
		}
		w.mu.Lock()
		if v.Len() > w.most {
			w.most, w.query = v.Len(), data.SQL
		}
		w.mu.Unlock()
	}
	return ctx
}

func (w *widestArray) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A round of more changes than the statement bound is written with no
// statement over the bound, whatever the kinds (INCRONCE views of one key,
// increments, window buckets), exactly once. Before, lockSeen and
// saveSeen took every view of the round in one statement, and the round
// statement every increment: a backlog's round of two million views
// outlived every attempt's deadline.
func TestRoundStatementsBounded(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	widest := &widestArray{}
	cfg.ConnConfig.Tracer = widest
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	const bound = 50
	s, err := slots.New(pool, slots.Options{Kinds: catalog.Writers(), Slots: 4, StatementRows: bound, SplitAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	const views, keys = 700, 300
	minute := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Unix()
	var batch []change.Change
	for i := range views {
		batch = append(batch, onceAt("vw:2", fmt.Sprintf("u%d", i), 0))
	}
	for i := range keys {
		key := fmt.Sprintf("k%04d", i)
		batch = append(batch, change.Change{Key: key, Kind: change.Total, Delta: 2},
			change.Change{Key: key, Kind: change.Minute, Bucket: minute, Delta: 2})
	}
	id := store.BatchID{Identity: store.Identity{Instance: "bound"}, Seq: 1}
	if _, err := s.ApplyOnce(context.Background(), id, batch); err != nil {
		t.Fatal(err)
	}
	if widest.most > bound {
		t.Errorf("widest statement: %d changes; want at most %d: %.200s", widest.most, bound, widest.query)
	}
	res, err := s.ApplyOnce(context.Background(), id, batch)
	if err != nil || !res.Duplicate {
		t.Fatalf("round again: %+v, %v; want a duplicate", res, err)
	}
	if got := total(t, db, "vw:2"); got != views {
		t.Errorf("total of vw:2: got %d; want %d", got, views)
	}
	var sum, buckets int64
	err = db.Pool.QueryRow(context.Background(), `SELECT (SELECT sum(total) FROM counter_totals WHERE key LIKE 'k%'),
		(SELECT sum(count) FROM counter_bucket_slots WHERE key LIKE 'k%')`).Scan(&sum, &buckets)
	if err != nil {
		t.Fatal(err)
	}
	if sum != 2*keys || buckets != 2*keys {
		t.Errorf("increments: totals %d, buckets %d; want %d each", sum, buckets, 2*keys)
	}
}

// A round split over more transactions than writers commits the lanes
// of those not held back when an attempt is cut short, and a retry
// writes only the rest: each attempt moves the round forward, and the
// round lands exactly once. Before, the round was two transactions of
// eight lanes each, and one held row kept half the round from
// committing. A key's views are all in one of the transactions (its
// lane's), so no two transactions of a round add to the same key's slot
// rows: views placed by their visitor's lane made the round's own
// transactions wait for each other past lock_timeout after an outage.
func TestLargeRoundRetryMakesProgress(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	// 4,032 views at 200 a transaction: one transaction per lane.
	s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4, StatementRows: 50, SplitAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const keys, visitors = 64, 63
	const views = keys * visitors
	var batch []change.Change
	for k := range keys {
		for v := range visitors {
			batch = append(batch, onceAt(fmt.Sprintf("vw:%d", k), fmt.Sprintf("u%d", v), 0))
		}
	}
	// Hold one visitor's seen row, as another daemon deciding the same
	// visitor would: its lane's transaction waits for it.
	held, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx) //nolint:errcheck // released below
	if _, err := held.Exec(ctx, `INSERT INTO counter_seen (key, visitor_hash) VALUES ('vw:0', $1)`,
		change.VisitorHash([]byte("u0"))); err != nil {
		t.Fatal(err)
	}
	sum := func() int64 {
		t.Helper()
		var n int64
		if err := db.Pool.QueryRow(ctx, `SELECT coalesce(sum(total), 0) FROM counter_totals WHERE key LIKE 'vw:%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	id := store.BatchID{Identity: store.Identity{Instance: "progress"}, Seq: 1}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.ApplyOnce(actx, id, batch)
		done <- err
	}()
	// Every lane but the held one commits, while the held one waits.
	lanesAt := func() int {
		t.Helper()
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counterd_instances WHERE last_seq = 1`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(time.Minute)
	for lanesAt() < store.Lanes-1 {
		if time.Now().After(deadline) {
			t.Fatalf("lanes committed while one row is held: %d after a minute; want %d", lanesAt(), store.Lanes-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("attempt with a seen row held: got nil; want an error")
	}
	if got := lanesAt(); got != store.Lanes-1 {
		t.Fatalf("lanes committed by the cut-short attempt: %d; want %d", got, store.Lanes-1)
	}
	// Every key of the held lane waits whole; every other key committed
	// whole.
	for k := range keys {
		key := fmt.Sprintf("vw:%d", k)
		want := int64(visitors)
		if store.LaneOf(key) == store.LaneOf("vw:0") {
			want = 0
		}
		if got := total(t, db, key); got != want {
			t.Errorf("%s after the cut-short attempt: got %d; want %d (a key's views in its lane's transaction)", key, got, want)
		}
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	before := sum()
	res, err := s.ApplyOnce(ctx, id, batch)
	if err != nil {
		t.Fatal(err)
	}
	if got := sum(); got != views {
		t.Fatalf("total after the retry: got %d; want %d", got, views)
	}
	if before == 0 || before == views || res.Duplicate {
		t.Fatalf("retry after %d of %d counted: %+v; want it to write the held lane's views only", before, views, res)
	}
}
