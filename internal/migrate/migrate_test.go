package migrate_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/pgtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func tables(t *testing.T, db *pgtest.DB) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		`SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 AND table_name <> 'counterd_migrations' ORDER BY 1`, db.Schema)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestUpDownUp(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true})
	ctx := context.Background()
	all, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	wantTables := []string{"counter_slots", "counter_totals", "counters"}

	check := func(step string, wantVersions []int, wantTables []string) {
		t.Helper()
		got, err := migrate.Applied(ctx, db.Pool)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, wantVersions) {
			t.Fatalf("%s: applied %v; want %v", step, got, wantVersions)
		}
		for _, tbl := range wantTables {
			if !slices.Contains(tables(t, db), tbl) {
				t.Fatalf("%s: table %s missing; have %v", step, tbl, tables(t, db))
			}
		}
	}
	var every []int
	for _, m := range all {
		every = append(every, m.Version)
	}

	applied, err := migrate.Up(ctx, db.Pool, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, every) {
		t.Fatalf("first up applied %v; want %v", applied, every)
	}
	check("up", every, wantTables)

	again, err := migrate.Up(ctx, db.Pool, quiet)
	if err != nil || len(again) != 0 {
		t.Fatalf("second up: applied %v, err %v; want nothing", again, err)
	}

	if _, err := migrate.Down(ctx, db.Pool, 0, quiet); err != nil {
		t.Fatal(err)
	}
	check("down", nil, nil)
	if left := tables(t, db); len(left) != 0 {
		t.Fatalf("down to zero left %v", left)
	}

	if _, err := migrate.Up(ctx, db.Pool, quiet); err != nil {
		t.Fatal(err)
	}
	check("up again", every, wantTables)
}

// Two daemons starting at once must apply each migration exactly once.
func TestConcurrentUp(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true})
	ctx := context.Background()
	const n = 6
	results := make([][]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = migrate.Up(ctx, db.Pool, quiet) })
	}
	wg.Wait()
	var total int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("runner %d: %v", i, errs[i])
		}
		total += len(results[i])
	}
	all, _ := migrate.All()
	if total != len(all) {
		t.Fatalf("migrations applied across runners: got %d; want %d", total, len(all))
	}
}
