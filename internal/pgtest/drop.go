package pgtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// dropAttempts bounds the retries of DROP SCHEMA after a deadlock or a
// lock timeout.
const dropAttempts = 5

// dropSchema drops a test's schema and everything in it.
//
// A session the test left behind can still hold locks in the schema: the
// backend of a daemon the test killed (SIGKILL) finishes the statement it
// is running before it notices that its client is gone. Its transaction
// takes table locks one after the other as the statement reaches each
// table, while DROP SCHEMA ... CASCADE takes an exclusive lock on every
// table in its own order, so each can wait for the other: "deadlock
// detected". The drop therefore first ends every other session that holds
// or awaits a lock on the schema's tables (only the test's own can: the
// schema's name is random), waits on locks for a bounded time, and tries
// again after a deadlock or a lock timeout.
func dropSchema(ctx context.Context, base, schema string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET lock_timeout = '5s'"); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		if err := endSessions(ctx, conn, schema); err != nil {
			return fmt.Errorf("end the sessions using it: %w", err)
		}
		_, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		if err == nil {
			return nil
		}
		if attempt == dropAttempts || !lockConflict(err) {
			return fmt.Errorf("attempt %d: %w", attempt, err)
		}
	}
}

// lockConflict reports whether err is a deadlock (40P01) or a lock
// timeout (55P03).
func lockConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "55P03")
}

// endSessions terminates the other sessions holding or awaiting a lock on
// a table in schema, and waits until they are gone.
func endSessions(ctx context.Context, conn *pgx.Conn, schema string) error {
	var pids []int32
	err := conn.QueryRow(ctx, `
		SELECT coalesce(array_agg(DISTINCT l.pid), '{}')
		FROM pg_locks l
		JOIN pg_class c ON c.oid = l.relation
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND l.pid <> pg_backend_pid()`, schema).Scan(&pids)
	if err != nil || len(pids) == 0 {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid`, pids); err != nil {
		return err
	}
	// pg_terminate_backend only signals; a backend releases its locks as
	// it exits.
	for {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of sessions %v still there: %w", left, pids, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
