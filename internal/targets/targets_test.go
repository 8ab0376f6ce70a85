package targets_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/targets"
)

func TestParse(t *testing.T) {
	t.Parallel()
	set, err := targets.Parse(" post:{id}:likes=posts.like_count ; post:{id}:views=app.posts.view_count;u={id}=users.n; ")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range set.Targets() {
		got = append(got, tg.Pattern+" -> "+tg.Schema+"|"+tg.Table+"|"+tg.Column)
	}
	want := []string{"post:{id}:likes -> |posts|like_count", "post:{id}:views -> app|posts|view_count", "u={id} -> |users|n"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %q; want %q", got, want)
	}
	if s, err := targets.Parse(""); err != nil || s.Len() != 0 {
		t.Fatalf("empty: got %v, %v; want no targets", s, err)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	f := func(spec, want string) {
		t.Helper()
		_, err := targets.Parse(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): %v; want an error containing %q", spec, err, want)
		}
	}
	f("post:likes=posts.like_count", "no {id} placeholder")
	f("post:{id}:{id}=posts.like_count", "has 2 {id} placeholders")
	f("{id}:likes=posts.like_count", "must start with literal text")
	f("post:*:{id}=posts.like_count", "only {id} is special")
	f("post:{id}", "want pattern=table.column")
	f("post:{id}=like_count", "want table.column or schema.table.column")
	f("post:{id}=a.b.c.d", "want table.column or schema.table.column")
	f("post:{id}=posts.like-count", `"like-count" is not an identifier`)
	f(`post:{id}=posts."like_count"`, "is not an identifier")
	f("post:{id}=posts.x; drop table posts", "want pattern=table.column")
	f("post:{id}=1posts.n", `"1posts" is not an identifier`)
	f("post:{id}=posts."+strings.Repeat("n", 64), "at most 63 bytes")
	f("post:{id}=posts.a;post:{id}:likes=posts.b", "both patterns can match one key")
	f("post:{id}:likes=posts.a;p{id}s=posts.b", "both patterns can match one key")
}

func TestMatchAndID(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	for _, sql := range []string{
		`CREATE TABLE pi (id integer PRIMARY KEY, n bigint)`,
		`CREATE TABLE pu (id uuid PRIMARY KEY, n bigint)`,
		`CREATE TABLE pt (id text PRIMARY KEY, n bigint)`,
	} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	set, err := targets.Parse("i:{id}:n=pi.n;u:{id}=pu.n;t:{id}:x=pt.n")
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Resolve(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	f := func(key, wantTarget, wantID string, wantOK bool) {
		t.Helper()
		tg, raw, ok := set.Match(key)
		if !ok {
			if wantTarget != "" {
				t.Errorf("Match(%q): no target; want %s", key, wantTarget)
			}
			return
		}
		if tg.Table != wantTarget {
			t.Errorf("Match(%q): got %s; want %s", key, tg.Table, wantTarget)
			return
		}
		id, ok := tg.ID(raw)
		if ok != wantOK || id != wantID {
			t.Errorf("ID of %q: got %q, %v; want %q, %v", key, id, ok, wantID, wantOK)
		}
	}
	f("i:42:n", "pi", "42", true)
	f("i:-7:n", "pi", "-7", true)
	f("i:042:n", "pi", "", false) // not canonical: 'i:' || 42 never makes it
	f("i:+42:n", "pi", "", false)
	f("i:abc:n", "pi", "", false)
	f("i:99999999999999999999:n", "pi", "", false)
	f("i::n", "", "", false) // an empty id matches no pattern
	f("i:1:m", "", "", false)
	f("u:0b7e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b", "pu", "0b7e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b", true)
	f("u:0B7E1F2A-3C4D-4E5F-8A9B-0C1D2E3F4A5B", "pu", "", false)
	f("u:0b7e1f2a3c4d4e5f8a9b0c1d2e3f4a5b", "pu", "", false)
	f("t:any thing; DROP TABLE pt:x", "pt", "any thing; DROP TABLE pt", true)
}

// Bad configurations are refused when the rollup starts, each with an
// error that names the target and says what is wrong.
func TestResolveErrors(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	for _, sql := range []string{
		`CREATE TABLE posts (id bigint PRIMARY KEY, like_count integer, title text, n2 bigint GENERATED ALWAYS AS (id * 2) STORED)`,
		`CREATE TABLE pairs (a integer, b integer, n bigint, PRIMARY KEY (a, b))`,
		`CREATE TABLE nokey (id integer, n bigint)`,
		`CREATE TABLE floaty (id double precision PRIMARY KEY, n bigint)`,
		`CREATE VIEW vposts AS SELECT * FROM posts`,
		`CREATE TABLE "Mixed" (id integer PRIMARY KEY, "Likes" bigint)`,
	} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	f := func(spec, want string) {
		t.Helper()
		set, err := targets.Parse(spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", spec, err)
		}
		err = set.Resolve(ctx, db.Pool)
		if want == "" {
			if err != nil {
				t.Errorf("Resolve(%q): %v; want no error", spec, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), spec) {
			t.Errorf("Resolve(%q): %v; want an error naming the target and containing %q", spec, err, want)
		}
	}
	f("p:{id}=posts.like_count", "")
	f("p:{id}="+db.Schema+".posts.like_count", "")
	f("p:{id}=Mixed.Likes", "")
	f("p:{id}=mixed.Likes", `table "mixed" does not exist`)
	f("p:{id}=postz.like_count", `table "postz" does not exist`)
	f("p:{id}=nosuchschema.posts.like_count", `table "nosuchschema"."posts" does not exist`)
	f("p:{id}=posts.likes", `column "likes" does not exist`)
	f("p:{id}=posts.title", "column title is text; a count goes in smallint, integer, bigint or numeric")
	f("p:{id}=posts.n2", "generated")
	f("p:{id}=posts.id", "is the primary key")
	f("p:{id}=pairs.n", "composite primary key (a, b)")
	f("p:{id}=nokey.n", "has no primary key")
	f("p:{id}=floaty.n", "primary key id of \"floaty\" is double precision")
	f("p:{id}=vposts.like_count", "is not a table")
}

// A table the rollup's role may read but not update is refused at start,
// not found out by the first fold. The role exists only inside a
// transaction that is rolled back.
func TestResolveNeedsPrivileges(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE posts (id bigint PRIMARY KEY, like_count integer)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	role := pgx.Identifier{db.Schema + "_reader"}.Sanitize()
	for _, sql := range []string{
		`CREATE ROLE ` + role + ` NOLOGIN`,
		`GRANT USAGE ON SCHEMA ` + pgx.Identifier{db.Schema}.Sanitize() + ` TO ` + role,
		`GRANT SELECT ON posts TO ` + role,
		`SET LOCAL ROLE ` + role,
	} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	const spec = "p:{id}=posts.like_count"
	set, err := targets.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	err = set.Resolve(ctx, tx)
	want := spec + `: the rollup's database role may not SELECT and UPDATE "posts"`
	if err == nil || err.Error() != want {
		t.Fatalf("Resolve as a role without UPDATE: %v; want %q", err, want)
	}
}

// Whatever ROLLUP_TARGETS holds, Parse either refuses it or returns
// targets whose names are plain identifiers and whose patterns hold one
// {id}: nothing else ever reaches SQL.
func FuzzParse(f *testing.F) {
	f.Add("post:{id}:likes=posts.like_count;post:{id}:views=app.posts.view_count")
	f.Add(`p:{id}=posts."x"; DROP TABLE posts`)
	f.Add("a={id}=b.c")
	f.Fuzz(func(t *testing.T, spec string) {
		set, err := targets.Parse(spec)
		if err != nil {
			return
		}
		for _, tg := range set.Targets() {
			if strings.Count(tg.Pattern, targets.Placeholder) != 1 {
				t.Fatalf("pattern %q", tg.Pattern)
			}
			for _, id := range []string{tg.Schema, tg.Table, tg.Column} {
				if strings.ContainsAny(id, "\"'; .-()\\\x00") {
					t.Fatalf("identifier %q in %q", id, spec)
				}
			}
		}
	})
}
