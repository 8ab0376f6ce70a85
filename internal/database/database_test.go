package database_test

import (
	"context"
	"errors"
	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/counterd/counterd/internal/database"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

// withQuery returns base with the raw query parameters q added. (pgx
// does not read + as a space, so url.Values.Encode will not do.)
func withQuery(base, q string) string {
	if q == "" {
		return base
	}
	if strings.Contains(base, "?") {
		return base + "&" + q
	}
	return base + "?" + q
}

// The pool's connections carry the configured timeouts, and a timeout the
// URL sets itself wins.
func TestOpenSetsTimeouts(t *testing.T) {
	t.Parallel()
	base := pgtest.URL(t)
	f := func(q string, opts database.Options, wantStatement, wantLock string) {
		t.Helper()
		pool, err := database.Open(withQuery(base, q), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var statement, lock string
		err = pool.QueryRow(ctx, `SELECT current_setting('statement_timeout'), current_setting('lock_timeout')`).Scan(&statement, &lock)
		if err != nil {
			t.Fatal(err)
		}
		if statement != wantStatement || lock != wantLock {
			t.Errorf("URL query %q, %+v: statement_timeout %s, lock_timeout %s; want %s, %s", q, opts, statement, lock, wantStatement, wantLock)
		}
	}
	opts := database.Options{StatementTimeout: 30 * time.Second, LockTimeout: 5 * time.Second}
	f("", opts, "30s", "5s")
	f("", database.Options{StatementTimeout: 1500 * time.Millisecond, LockTimeout: time.Microsecond}, "1500ms", "1ms")
	f("statement_timeout=1234", opts, "1234ms", "5s")
	f("options=-c%20lock_timeout%3D7s", opts, "30s", "7s")
	f("options=--statement-timeout%3D2min", opts, "2min", "5s")
	f("", database.Options{}, "0", "0")
}

// A fold against a table another connection holds locked fails with the
// server's lock timeout instead of hanging.
func TestFoldFailsFastOnLockedTable(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Apply(ctx, []change.Change{{Kind: change.Total, Key: "post:1", Delta: 1}}); err != nil {
		t.Fatal(err)
	}

	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `LOCK TABLE counter_slots IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	const lockTimeout = 200 * time.Millisecond
	pool, err := database.Open(db.URL, database.Options{MaxConns: 2, StatementTimeout: 20 * time.Second, LockTimeout: lockTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	folder, err := slots.New(pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = folder.Fold(ctx, slots.FoldOptions{})
	took := time.Since(start)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("fold of a locked table: %v after %v; want a lock timeout (55P03)", err, took)
	}
	// Far above the lock timeout, far below the 30s the test allows.
	if took > 10*time.Second {
		t.Fatalf("fold took %v to fail; want about %v", took, lockTimeout)
	}
	if !strings.Contains(err.Error(), "lock timeout") {
		t.Errorf("error %q does not say lock timeout", err)
	}
}

// A statement running past the statement timeout is cancelled by the
// server.
func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	pool, err := database.Open(pgtest.URL(t), database.Options{StatementTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = pool.Exec(ctx, `SELECT pg_sleep(20)`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("pg_sleep(20): %v; want a statement timeout (57014)", err)
	}
}

// Wait gives up at once on a connection the server refuses for good, and
// says why without the password. (The test server trusts every local
// connection, so no password is ever checked: a missing role stands in
// for a failed login, class 28 all the same.)
func TestWaitReportsPermanentCause(t *testing.T) {
	t.Parallel()
	base, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	const password = "s3cret-Pa55"
	f := func(user, dbname, wantCode string) {
		t.Helper()
		u := *base
		if user != "" {
			u.User = url.UserPassword(user, password)
		} else {
			u.User = url.UserPassword(base.User.Username(), password)
		}
		if dbname != "" {
			u.Path = "/" + dbname
		}
		pool, err := database.Open(u.String(), database.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		start := time.Now()
		err = database.Wait(context.Background(), pool, 30*time.Second)
		took := time.Since(start)
		var pgErr *pgconn.PgError
		switch {
		case !errors.As(err, &pgErr) || pgErr.Code != wantCode:
			t.Errorf("user %q, database %q: %v; want SQLSTATE %s", user, dbname, err, wantCode)
		case took > 10*time.Second:
			t.Errorf("user %q, database %q: gave up after %v; want at once", user, dbname, took)
		case strings.Contains(err.Error(), password):
			t.Errorf("error %q contains the password", err)
		case !strings.Contains(err.Error(), wantCode):
			t.Errorf("error %q does not name the cause", err)
		}
	}
	f("", "counterd_no_such_database", "3D000")
	f("counterd_no_such_role", "", "28000")
}

// When the server never answers, Wait reports the last reason a ping
// failed, not the deadline that ended the wait.
func TestWaitReportsLastError(t *testing.T) {
	t.Parallel()
	pool, err := database.Open("postgres://postgres:pw@/counterd?host=/nonexistent-counterd-dir&sslmode=disable", database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	err = database.Wait(context.Background(), pool, 600*time.Millisecond)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Wait on a missing socket: %v; want the dial error", err)
	}
	if strings.Contains(err.Error(), ":pw@") {
		t.Fatalf("error %q contains the URL", err)
	}
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	f := func(err error, want bool) {
		t.Helper()
		if got := database.Permanent(err); got != want {
			t.Errorf("Permanent(%v) = %v; want %v", err, got, want)
		}
	}
	f(&pgconn.PgError{Code: "28P01"}, true) // password authentication failed
	f(&pgconn.PgError{Code: "28000"}, true) // invalid authorization, e.g. no such role
	f(&pgconn.PgError{Code: "3D000"}, true) // no such database
	f(pgconn.NewParseConfigError("x", "bad", nil), true)
	f(&pgconn.PgError{Code: "57P03"}, false) // the server is starting up
	f(&pgconn.PgError{Code: "53300"}, false) // too many connections
	f(context.DeadlineExceeded, false)
	f(errors.New("dial unix: connect: no such file or directory"), false)
}

// A URL with another scheme, or keyword/value settings naming neither a
// host nor a database, is refused without quoting the string. Before,
// pgx read postgress://u:pw@h/db?sslmode=disable as one unknown setting
// and the pool dialed the local socket as the current user.
func TestOpenRefusesForeignScheme(t *testing.T) {
	t.Parallel()
	f := func(dsn, want string) {
		t.Helper()
		pool, err := database.Open(dsn, database.Options{})
		if want == "ok" {
			if err != nil {
				t.Errorf("Open(%q): %v; want a pool", dsn, err)
				return
			}
			pool.Close()
			return
		}
		if err == nil {
			pool.Close()
			t.Errorf("Open(%q) = a pool; want an error saying %q", dsn, want)
			return
		}
		if !strings.HasPrefix(err.Error(), "DATABASE_URL is not a valid PostgreSQL URL or DSN") || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %q; want it naming DATABASE_URL and saying %q", dsn, err, want)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): %q shows the password", dsn, err)
		}
	}
	f("postgress://u:hunter2@db.example/app?sslmode=disable", "scheme postgress:// is neither postgres:// nor postgresql://")
	f("postgress://u:hunter2@db.example/app", "scheme postgress:// is neither")
	f("mysql://u:hunter2@db.example/app", "scheme mysql:// is neither")
	f("Postgres://u:hunter2@db.example/app", "scheme Postgres:// is neither")
	f("db.example:5432/app?password=hunter2", "must name host or dbname")
	f("sslmode=disable password=hunter2", "must name host or dbname")
	f("user=u options='-c host=x' password=hunter2", "must name host or dbname")
	f("not a url", "DSN") // as before
	f("postgres://u:hunter2@db.example/app", "ok")
	f("postgresql://u:hunter2@db.example/app", "ok")
	f("host=/tmp port=5432 user=u", "ok")
	f("dbname=app sslmode=disable", "ok")
	f(" hostaddr = 127.0.0.1 ", "ok")
	f("options='-c x=http://y' dbname = 'my app'", "ok")
}
