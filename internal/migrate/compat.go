package migrate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/version"
)

// A fleet runs several versions at once during a rolling upgrade: the
// first new daemon migrates the schema while old ones still write to it.
// A migration says which older binaries survive it with a line
//
//	-- compatible-with: 19
//
// in its up file: binaries that know migration 19 or later may run
// against a schema that has it. Without the line only binaries that know
// the migration itself may. The minimum is recorded in
// counterd_migrations.compatible_with (migration 020), so an older binary,
// which does not have the newer file, reads it from the database and
// refuses a schema it could not survive (Check, and Up before anything).
// Binaries before migration 020 have no such check.

// ErrTooNew is wrapped by a TooNewError.
var ErrTooNew = errors.New("database schema has migrations this binary does not know")

// TooNewError says that the schema has a migration this binary does not
// know and that was not declared compatible with it.
type TooNewError struct {
	// Binary is this binary's version (internal/version).
	Binary string
	// Known and KnownName are this binary's newest migration.
	Known     int
	KnownName string
	// Schema and SchemaName are the schema's newest migration.
	Schema     int
	SchemaName string
	// Needs is the oldest migration a binary must know to run against
	// the schema.
	Needs int
}

func (e *TooNewError) Error() string {
	return fmt.Sprintf("this binary (version %s) knows migrations up to %03d_%s, but the database schema has migration %03d_%s "+
		"and needs a binary that knows migration %03d or later: refusing to run against it; "+
		"run a version that knows migration %03d (see docs/upgrading.md)",
		e.Binary, e.Known, e.KnownName, e.Schema, e.SchemaName, e.Needs, e.Needs)
}

func (e *TooNewError) Unwrap() error { return ErrTooNew }

// compatibleRE is the declaration line of an up file.
var compatibleRE = regexp.MustCompile(`(?m)^--[ \t]*compatible-with:[ \t]*(\S*)[ \t]*$`)

// compatibleWith returns what the up file of migration v declares: the
// oldest migration a binary must know to run against a schema with v.
func compatibleWith(v int, up string) (int, error) {
	ms := compatibleRE.FindAllStringSubmatch(up, -1)
	switch len(ms) {
	case 0:
		return v, nil
	case 1:
	default:
		return 0, fmt.Errorf("%d compatible-with lines; want at most one", len(ms))
	}
	n, err := strconv.Atoi(ms[0][1])
	if err != nil || n < 1 || n > v {
		return 0, fmt.Errorf("compatible-with: %q: want a migration number from 1 to %d (this one)", ms[0][1], v)
	}
	return n, nil
}

// Newest returns the newest migration this binary carries.
func Newest() (Migration, error) {
	migs, err := All()
	if err != nil {
		return Migration{}, err
	}
	return migs[len(migs)-1], nil
}

// schemaRow is a row of counterd_migrations past this binary's newest.
type schemaRow struct {
	Version    int
	Name       string
	AppliedAt  time.Time
	Compatible *int // nil: recorded before migration 020, or without a declaration
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Check returns a TooNewError if the schema of pool has migrations this
// binary does not know and that are not declared compatible with it. It
// only reads, and a schema without counterd_migrations passes (nothing
// is migrated yet, or pool is a PL/Proxy proxy database), so the rollup,
// which does not migrate, may call it.
func Check(ctx context.Context, pool *pgxpool.Pool) error {
	migs, err := All()
	if err != nil {
		return err
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('counterd_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("read version table: %w", err)
	}
	if !exists {
		return nil
	}
	_, err = check(ctx, pool, migs)
	return err
}

// check reads the migrations of the schema past migs' newest. It returns
// them when each is declared compatible with that newest, and a
// TooNewError otherwise.
func check(ctx context.Context, q querier, migs []Migration) ([]schemaRow, error) {
	known := migs[len(migs)-1]
	has, err := hasCompatible(ctx, q)
	if err != nil {
		return nil, err
	}
	col := "NULL::integer"
	if has {
		col = "compatible_with"
	}
	rows, err := q.Query(ctx, `SELECT version, name, applied_at, `+col+` FROM counterd_migrations WHERE version > $1 ORDER BY version`, known.Version)
	if err != nil {
		return nil, fmt.Errorf("read version table: %w", err)
	}
	newer, err := pgx.CollectRows(rows, pgx.RowToStructByPos[schemaRow])
	if err != nil {
		return nil, fmt.Errorf("read version table: %w", err)
	}
	return newer, refuse(known, newer)
}

// refuse returns a TooNewError if a binary whose newest migration is
// known may not run against a schema with the migrations newer.
func refuse(known Migration, newer []schemaRow) error {
	needs := 0
	for _, r := range newer {
		need := r.Version // an undeclared migration: only binaries that know it
		if r.Compatible != nil {
			need = *r.Compatible
		}
		if need > known.Version {
			needs = max(needs, need)
		}
	}
	if needs == 0 {
		return nil
	}
	last := newer[len(newer)-1]
	return &TooNewError{Binary: version.Version(), Known: known.Version, KnownName: known.Name, Schema: last.Version, SchemaName: last.Name, Needs: needs}
}

// maxCompatible is the oldest migration a binary must know to run
// against a schema with the migrations newer (all declared).
func maxCompatible(newer []schemaRow) int {
	n := 0
	for _, r := range newer {
		if r.Compatible != nil {
			n = max(n, *r.Compatible)
		}
	}
	return n
}

// hasCompatible reports whether counterd_migrations has the
// compatible_with column (migration 020 adds it).
func hasCompatible(ctx context.Context, q querier) (bool, error) {
	var has bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_attribute
		WHERE attrelid = to_regclass('counterd_migrations') AND attname = 'compatible_with' AND NOT attisdropped)`).Scan(&has)
	if err != nil {
		return false, fmt.Errorf("read version table: %w", err)
	}
	return has, nil
}

// record inserts m's version row, with its declaration once the table
// has the column for it.
func record(ctx context.Context, tx pgx.Tx, m Migration) error {
	has, err := hasCompatible(ctx, tx)
	if err != nil {
		return err
	}
	if has {
		_, err = tx.Exec(ctx, `INSERT INTO counterd_migrations (version, name, compatible_with) VALUES ($1, $2, $3)`,
			m.Version, m.Name, m.CompatibleWith)
	} else {
		_, err = tx.Exec(ctx, `INSERT INTO counterd_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
	}
	return err
}
