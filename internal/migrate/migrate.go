// Package migrate applies counterd's numbered SQL migrations (package sql)
// to a PostgreSQL database.
//
// Each migration runs in its own transaction together with the row that
// records its version, so a migration is either wholly applied and recorded
// or not at all. Every transaction first takes a transaction-scoped advisory
// lock, so two daemons starting at once apply each migration exactly once:
// the second waits, then sees the version row and skips it.
package migrate

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	schema "github.com/counterd/counterd/sql"
)

// lockKey is the advisory lock every migration transaction holds. It is
// combined with the current schema's name so tests that migrate separate
// schemas in one database do not serialise on each other.
const lockKey = 0x636f756e74657264 // "counterd"

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
	// CompatibleWith is the oldest migration a binary must know to run
	// against a schema that has this one: the up file's
	// "-- compatible-with: N" line, else Version itself (see Check).
	CompatibleWith int
}

var fileRE = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.(up|down)\.sql$`)

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	return load(schema.Files())
}

func load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		mig := byVersion[v]
		if mig == nil {
			mig = &Migration{Version: v, Name: m[2]}
			byVersion[v] = mig
		}
		if mig.Name != m[2] {
			return nil, fmt.Errorf("migration %03d has two names: %s and %s", v, mig.Name, m[2])
		}
		if m[3] == "up" {
			mig.Up = string(body)
			if mig.CompatibleWith, err = compatibleWith(v, mig.Up); err != nil {
				return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
			}
		} else {
			mig.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %03d_%s needs both an up and a down file", m.Version, m.Name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration versions must run 1..n without gaps; found %03d at position %d", m.Version, i+1)
		}
	}
	return out, nil
}

// Up applies every migration not yet applied and returns the versions it
// applied.
func Up(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) ([]int, error) {
	migs, err := All()
	if err != nil {
		return nil, err
	}
	// A schema with migrations this binary does not know is refused
	// before anything is applied, unless they were declared compatible
	// with it.
	var newer []schemaRow
	_, err = step(ctx, pool, 0, func(tx pgx.Tx, _ bool) (bool, error) {
		var cerr error
		newer, cerr = check(ctx, tx, migs)
		return false, cerr
	})
	if err != nil {
		return nil, err
	}
	if len(newer) > 0 {
		log.Info("the schema has newer migrations, declared compatible with this binary",
			"known", migs[len(migs)-1].Version, "schema", newer[len(newer)-1].Version, "compatible_with", maxCompatible(newer))
	}
	var applied []int
	for _, m := range migs {
		done, err := step(ctx, pool, m.Version, func(tx pgx.Tx, have bool) (bool, error) {
			if have {
				return false, nil
			}
			if _, err := tx.Exec(ctx, m.Up); err != nil {
				return false, err
			}
			return true, record(ctx, tx, m)
		})
		if err != nil {
			return applied, fmt.Errorf("migrate up %03d_%s: %w", m.Version, m.Name, err)
		}
		if done {
			log.Info("applied migration", "version", m.Version, "name", m.Name)
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}

// Down reverts applied migrations above target, newest first, and returns
// the versions it reverted. Down(ctx, pool, 0) empties the schema.
func Down(ctx context.Context, pool *pgxpool.Pool, target int, log *slog.Logger) ([]int, error) {
	migs, err := All()
	if err != nil {
		return nil, err
	}
	var reverted []int
	for i := len(migs) - 1; i >= 0 && migs[i].Version > target; i-- {
		m := migs[i]
		done, err := step(ctx, pool, m.Version, func(tx pgx.Tx, have bool) (bool, error) {
			if !have {
				return false, nil
			}
			if _, err := tx.Exec(ctx, m.Down); err != nil {
				return false, err
			}
			_, err := tx.Exec(ctx, `DELETE FROM counterd_migrations WHERE version = $1`, m.Version)
			return true, err
		})
		if err != nil {
			return reverted, fmt.Errorf("migrate down %03d_%s: %w", m.Version, m.Name, err)
		}
		if done {
			log.Info("reverted migration", "version", m.Version, "name", m.Name)
			reverted = append(reverted, m.Version)
		}
	}
	return reverted, nil
}

// Applied returns the versions recorded as applied, in order.
func Applied(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	var out []int
	_, err := step(ctx, pool, 0, func(tx pgx.Tx, _ bool) (bool, error) {
		rows, err := tx.Query(ctx, `SELECT version FROM counterd_migrations ORDER BY version`)
		if err != nil {
			return false, err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[int])
		return false, err
	})
	return out, err
}

// step runs fn in one transaction that holds the migration lock and has
// made sure the version table exists. have says whether version is applied.
func step(ctx context.Context, pool *pgxpool.Pool, version int, fn func(tx pgx.Tx, have bool) (bool, error)) (bool, error) {
	var changed bool
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// A migration may rewrite a large table, and a second daemon waits
		// here for the first one's migration: neither may be cut short by
		// the connection's statement or lock timeout. The caller's context
		// still bounds it.
		if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0`); err != nil {
			return fmt.Errorf("lift timeouts for the migration: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::bigint # hashtext(current_schema())::bigint)`, int64(lockKey)); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS counterd_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return fmt.Errorf("create version table: %w", err)
		}
		var have bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM counterd_migrations WHERE version = $1)`, version).Scan(&have); err != nil {
			return fmt.Errorf("read version table: %w", err)
		}
		var err error
		changed, err = fn(tx, have)
		return err
	})
	return changed, err
}
