package cluster

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/counterd/counterd/internal/pgtest"
)

// TestDiscover reads a real cluster's partitions and connects to each:
// each answers with its own schema, in partition order, and PL/Proxy
// routes a key to the partition Partition names.
func TestDiscover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.NewCluster(t, 4, pgtest.Options{NoMigrate: true})
	dsns, err := Discover(ctx, c.Proxy.Pool, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(dsns) != 4 {
		t.Fatalf("%d partitions, want 4", len(dsns))
	}
	for i, dsn := range dsns {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("partition %d: %v", i, err)
		}
		var schema string
		err = conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema)
		conn.Close(ctx)
		if err != nil || schema != c.Parts[i].Schema {
			t.Errorf("partition %d: schema %q (%v), want %q", i, schema, err, c.Parts[i].Schema)
		}
	}
	// PL/Proxy's own routing agrees with Partition.
	if _, err := c.Proxy.Pool.Exec(ctx, `CREATE FUNCTION where_is(k text) RETURNS text AS $$
	    CLUSTER '`+c.Name+`'; RUN ON hashtext(k); SELECT current_schema()::text; $$ LANGUAGE plproxy`); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"post:1", "post:2", "user:7", "", "日本", "a:b:c:d:e:f:g:h:i:j"} {
		var schema string
		if err := c.Proxy.Pool.QueryRow(ctx, `SELECT where_is($1)`, k).Scan(&schema); err != nil {
			t.Fatal(err)
		}
		if want := c.Parts[Partition(k, 4)].Schema; schema != want {
			t.Errorf("key %q: PL/Proxy ran on %s, Partition says %s", k, schema, want)
		}
	}
}

func TestDiscoverRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.NewCluster(t, 2, pgtest.Options{NoMigrate: true})
	if _, err := Discover(ctx, c.Proxy.Pool, "no_such_cluster"); err == nil || !strings.Contains(err.Error(), "no PL/Proxy server") {
		t.Errorf("missing cluster: %v", err)
	}
	for _, tc := range []struct {
		options []string
		want    string
	}{
		{nil, "no partitions"},
		{[]string{"p0=a", "p1=b", "p2=c"}, "power of two"},
		{[]string{"p0=a", "p2=b"}, "are not p0..p1"},
		{[]string{"connection_lifetime=1", "p0=a"}, ""},
	} {
		_, err := partitions("x", tc.options)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("partitions(%q) = %v, want %q", tc.options, err, tc.want)
		}
	}
}

func TestUserOptionsQuote(t *testing.T) {
	t.Parallel()
	got, err := userOptions([]string{"password=it's a \\ secret", "user=bob", "other=x"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `password='it\'s a \\ secret' user='bob'`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	cfg, err := pgconn.ParseConfig("host=/tmp " + got)
	if err != nil || cfg.Password != `it's a \ secret` || cfg.User != "bob" {
		t.Errorf("pgx reads %q back as user %q password %q (%v)", got, cfg.User, cfg.Password, err)
	}
}
