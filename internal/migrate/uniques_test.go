package migrate_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/pgtest"
)

// freshDatabase creates a database without the hll extension, owned by a
// new role without superuser, both dropped when the test ends, and
// returns a function opening a pool on it as user with search_path path
// ("" for the server's default).
func freshDatabase(t *testing.T, ctx context.Context) (owner string, open func(user, path string) *pgxpool.Pool) {
	t.Helper()
	base := pgtest.URL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "cdt_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{"CREATE ROLE " + name + " LOGIN NOSUPERUSER", "CREATE DATABASE " + name + " OWNER " + name} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		for _, q := range []string{"DROP DATABASE " + name + " WITH (FORCE)", "DROP ROLE " + name} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	return name, func(user, path string) *pgxpool.Pool {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		if user == "" {
			user = u.User.Username()
		}
		u.User = url.User(user)
		u.Path = "/" + name
		if path != "" {
			q := u.Query()
			q.Set("search_path", path)
			u.RawQuery = q.Encode()
		}
		p, err := pgxpool.New(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
}

// In a database without the hll extension, the uniques migration run by
// a role that may not create it stops with what a superuser must run, and
// leaves nothing applied past the one before; once a superuser created
// the extension as it says, the migration completes.
func TestUniquesNeedTheExtension(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name, open := freshDatabase(t, ctx)
	owner := open(name, "")
	_, err := migrate.Up(ctx, owner, quiet)
	if err == nil || !strings.Contains(err.Error(), "run CREATE EXTENSION hll; as a superuser") {
		t.Fatalf("migrate as a role that may not create hll: got %v; want the superuser's command", err)
	}
	applied, err := migrate.Applied(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || applied[len(applied)-1] != 13 {
		t.Fatalf("applied after the refusal: %v; want through 13", applied)
	}
	if _, err := open("", "").Exec(ctx, "CREATE EXTENSION hll"); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, owner, quiet); err != nil {
		t.Fatalf("migrate once the extension exists: %v", err)
	}
	var estimate float64
	if err := owner.QueryRow(ctx, `SELECT estimate FROM counter_uniques(ARRAY['none'])`).Scan(&estimate); err != nil || estimate != 0 {
		t.Fatalf("counter_uniques as the owner: got %v, %v; want 0", estimate, err)
	}
}

// A migration into a schema of its own that creates the extension puts it
// in public, so dropping that schema leaves it to the rest of the
// database; the functions work with only that schema on the path.
func TestUniquesExtensionInPublic(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, open := freshDatabase(t, ctx)
	super := open("", "")
	if _, err := super.Exec(ctx, "CREATE SCHEMA app"); err != nil {
		t.Fatal(err)
	}
	app := open("", "app")
	if _, err := migrate.Up(ctx, app, quiet); err != nil {
		t.Fatal(err)
	}
	var where string
	if err := super.QueryRow(ctx, `SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'hll'`).Scan(&where); err != nil || where != "public" {
		t.Fatalf("hll created in %q (%v); want public", where, err)
	}
	var estimate float64
	if err := app.QueryRow(ctx, `SELECT estimate FROM counter_uniques(ARRAY['none'])`).Scan(&estimate); err != nil || estimate != 0 {
		t.Fatalf("counter_uniques with only app on the path: got %v, %v; want 0", estimate, err)
	}
}
