package pattern_test

import (
	"context"
	"testing"
	"time"

	"github.com/counterd/counterd/bench/internal/pattern"
	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/pgtest"
)

func TestPatternsAccount(t *testing.T) {
	t.Parallel()
	for _, p := range pattern.All() {
		for _, dist := range []keyspace.Dist{keyspace.Hot, keyspace.Uniform} {
			t.Run(p.Name+"/"+dist.String(), func(t *testing.T) {
				t.Parallel()
				db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 6})
				ctx := context.Background()
				if err := p.Setup(ctx, db.Pool, 50); err != nil {
					t.Fatal(err)
				}
				res, err := pattern.Run(ctx, db.Pool, p, pattern.Load{
					Clients: 4, Duration: 150 * time.Millisecond, MaxOps: 300, Dist: dist, Keys: 50,
				})
				if err != nil {
					t.Fatal(err)
				}
				if res.Errors != 0 || res.Ops == 0 || res.Ops > 4*300 {
					t.Fatalf("ops %d errors %d (%v); want 1..1200 and no errors", res.Ops, res.Errors, res.Err)
				}
				switch p.Accounting {
				case pattern.Exact:
					if res.Stored != res.Ops || res.Rows != res.Ops {
						t.Fatalf("stored %d rows %d; want both %d", res.Stored, res.Rows, res.Ops)
					}
				case pattern.Lossy:
					if res.Stored > res.Ops || res.Stored < 1 || res.Rows != res.Ops {
						t.Fatalf("stored %d rows %d; want 1..%d stored and %d rows", res.Stored, res.Rows, res.Ops, res.Ops)
					}
				case pattern.Estimated:
					if res.Stored != res.Rows*pattern.SampleN {
						t.Fatalf("stored %d; want rows %d × %d", res.Stored, res.Rows, pattern.SampleN)
					}
				}
				if res.P50 <= 0 && p.Accounting != pattern.Estimated {
					t.Fatalf("p50 %v; want positive", res.P50)
				}
			})
		}
	}
}

func TestCeilingStoresEveryDelta(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dist  keyspace.Dist
		conns int
	}{{keyspace.Zipf, 1}, {keyspace.Uniform, 2}} {
		t.Run(tc.dist.String(), func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 4})
			ctx := context.Background()
			if err := pattern.SetupCeiling(ctx, db.Pool, 4000); err != nil {
				t.Fatal(err)
			}
			res, err := pattern.Ceiling(ctx, db.Pool, pattern.CeilingLoad{
				Conns: tc.conns, Duration: 100 * time.Millisecond, Batch: 10000, Dist: tc.dist, Keys: 4000,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Batch != 4000/tc.conns/4 {
				t.Errorf("batch %d; want %d", res.Batch, 4000/tc.conns/4)
			}
			if res.Statements == 0 || res.Stored != res.Increments || res.Rows > res.Statements*int64(res.Batch) {
				t.Fatalf("statements %d rows %d increments %d stored %d; want stored == increments", res.Statements, res.Rows, res.Increments, res.Stored)
			}
		})
	}
}

// TestNamesAreDistinct: reports and settings find a pattern by its name,
// and each keeps its own table.
func TestNamesAreDistinct(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, p := range pattern.All() {
		if p.Name == "" || seen[p.Name] {
			t.Errorf("pattern name %q is empty or repeated", p.Name)
		}
		seen[p.Name] = true
		if got := p.Table(); got != "pattern_"+p.Name {
			t.Errorf("%s: table %q; want %q", p.Name, got, "pattern_"+p.Name)
		}
	}
}
