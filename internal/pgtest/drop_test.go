package pgtest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/pgtest"
)

// cleanupTB runs a test's cleanups when the test says, and keeps their
// errors.
type cleanupTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	errs     []string
	once     sync.Once
}

func (c *cleanupTB) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }

func (c *cleanupTB) Errorf(format string, v ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, v...))
}

// runCleanups runs the cleanups once, last first, as testing does.
func (c *cleanupTB) runCleanups() {
	c.once.Do(func() {
		for i := len(c.cleanups) - 1; i >= 0; i-- {
			c.cleanups[i]()
		}
	})
}

// A session left in a transaction on the test's tables, as the backend of
// a daemon the test killed is until it notices, neither blocks the drop of
// the test's schema nor deadlocks with it: it holds a lock the drop needs
// and, once the drop waits for it, asks for a table the drop holds.
func TestDropEndsLeftoverSessions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb := &cleanupTB{TB: t}
	t.Cleanup(tb.runCleanups) // if the test ends early
	db := pgtest.New(tb, pgtest.Options{})
	var tables []string
	rows, err := db.Pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename <> 'counter_slots'`, db.Schema)
	if err == nil {
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(tables) == 0 {
		t.Fatalf("the schema's tables: %v, %v", tables, err)
	}
	left, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer left.Close(context.Background())
	if _, err := left.Exec(ctx, "BEGIN; LOCK TABLE counter_slots IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	watch, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())

	dropped, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			// A session other than the leftover one waits for a lock in
			// the schema: the drop.
			var waiting bool
			err := watch.QueryRow(ctx, `
				SELECT EXISTS (SELECT FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
					JOIN pg_namespace n ON n.oid = c.relnamespace
					WHERE n.nspname = $1 AND NOT l.granted AND l.pid <> $2)`,
				db.Schema, left.PgConn().PID()).Scan(&waiting)
			if err != nil {
				return
			}
			if waiting {
				// Fails once the drop ends this session, as it should.
				_, _ = left.Exec(ctx, "LOCK TABLE "+strings.Join(tables, ", ")+" IN ROW EXCLUSIVE MODE")
				return
			}
			select {
			case <-dropped:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	tb.runCleanups()
	close(dropped)
	<-watched
	if len(tb.errs) > 0 {
		t.Fatalf("cleanup: %s", strings.Join(tb.errs, "; "))
	}
	var exists bool
	if err := watch.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, db.Schema).Scan(&exists); err != nil || exists {
		t.Fatalf("schema %s after the cleanup: exists %v, %v; want dropped", db.Schema, exists, err)
	}
}
