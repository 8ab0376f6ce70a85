package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/pgtest"
)

// Up records each migration's declaration from 020 on; a schema with a
// newer migration declared compatible with this binary is used as it is,
// and one with a newer migration that is not (or that declares nothing)
// is refused by Up, before it applies anything, and by Check.
func TestRefusesUnknownMigrations(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	newest, err := migrate.Newest()
	if err != nil {
		t.Fatal(err)
	}
	compat := func(v int) string {
		t.Helper()
		var s string
		if err := db.Pool.QueryRow(ctx, `SELECT coalesce(compatible_with::text, 'NULL') FROM counterd_migrations WHERE version = $1`, v).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := compat(20); got != "19" {
		t.Errorf("020's row is compatible with %s; want 19", got)
	}
	if got := compat(19); got != "NULL" {
		t.Errorf("019's row is compatible with %s; want NULL (applied before the column existed)", got)
	}
	allow := func() {
		t.Helper()
		if err := migrate.Check(ctx, db.Pool); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if applied, err := migrate.Up(ctx, db.Pool, quiet); err != nil || len(applied) != 0 {
			t.Fatalf("Up: applied %v, %v; want nothing and no error", applied, err)
		}
	}
	refused := func(schema, needs int) {
		t.Helper()
		for name, f := range map[string]func() error{
			"Check": func() error { return migrate.Check(ctx, db.Pool) },
			"Up":    func() error { _, err := migrate.Up(ctx, db.Pool, quiet); return err },
		} {
			err := f()
			var e *migrate.TooNewError
			if !errors.As(err, &e) || !errors.Is(err, migrate.ErrTooNew) {
				t.Fatalf("%s: %v; want a TooNewError", name, err)
			}
			if e.Known != newest.Version || e.Schema != schema || e.Needs != needs {
				t.Errorf("%s: known %d, schema %d, needs %d; want %d, %d, %d", name, e.Known, e.Schema, e.Needs, newest.Version, schema, needs)
			}
			for _, want := range []string{fmt.Sprintf("up to %03d_%s", newest.Version, newest.Name), fmt.Sprintf("migration %03d_future", schema)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %q does not say %q", name, err, want)
				}
			}
		}
	}
	insert := func(v int, c any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO counterd_migrations (version, name, compatible_with) VALUES ($1, 'future', $2)`, v, c); err != nil {
			t.Fatal(err)
		}
	}
	allow()
	next := newest.Version + 1
	insert(next, newest.Version) // an expand migration of the next release
	allow()
	insert(next+1, next+1) // its contract migration
	refused(next+1, next+1)
	if _, err := db.Pool.Exec(ctx, `DELETE FROM counterd_migrations WHERE version = $1`, next+1); err != nil {
		t.Fatal(err)
	}
	allow()
	insert(next+1, nil) // no declaration: only binaries that know it
	refused(next+1, next+1)
}

// Check passes a schema that has no version table (nothing migrated yet,
// or a PL/Proxy proxy database) and creates nothing there.
func TestCheckWithoutVersionTable(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true})
	if err := migrate.Check(context.Background(), db.Pool); err != nil {
		t.Fatal(err)
	}
	var exists bool
	if err := db.Pool.QueryRow(context.Background(), `SELECT to_regclass('counterd_migrations') IS NOT NULL`).Scan(&exists); err != nil || exists {
		t.Fatalf("counterd_migrations exists after Check: %v, %v", exists, err)
	}
}

// A schema migrated only up to 019 (no compatible_with column) with a
// migration this binary does not know is refused before 020 is applied.
func TestRefusesBeforeApplying(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	if _, err := migrate.Down(ctx, db.Pool, 19, quiet); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counterd_migrations (version, name) VALUES (900, 'future')`); err != nil {
		t.Fatal(err)
	}
	applied, err := migrate.Up(ctx, db.Pool, quiet)
	if !errors.Is(err, migrate.ErrTooNew) || len(applied) != 0 {
		t.Fatalf("Up: applied %v, %v; want nothing and a refusal", applied, err)
	}
	versions, err := migrate.Applied(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if versions[len(versions)-2] != 19 {
		t.Fatalf("applied %v; want 1..19 and 900", versions)
	}
}
