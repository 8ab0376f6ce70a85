package targets

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what Resolve needs of a pool or connection.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// countTypes are the column types a target may add to: exact numbers.
var countTypes = map[string]bool{"smallint": true, "integer": true, "bigint": true, "numeric": true}

// idKinds are the primary key types an {id} can be parsed as.
var idKinds = map[string]idKind{
	"smallint": idInt, "integer": idInt, "bigint": idInt,
	"uuid": idUUID,
	"text": idText, "character varying": idText,
}

// Resolve looks every target's table and column up in the catalog and
// prepares its statement. The table must exist (an unqualified name is
// found through the search_path, then pinned to its schema), have a
// single-column primary key of a type {id} can be parsed as, and the
// column must exist, not be generated or the key, and hold an exact
// number. Errors name the target and say what is wrong.
func (s *Set) Resolve(ctx context.Context, db Querier) error {
	for _, t := range s.Targets() {
		if err := t.resolve(ctx, db); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}

// resolve checks t against the catalog, table, key and column in turn,
// and prepares its statement.
func (t *Target) resolve(ctx context.Context, db Querier) error {
	name := pgx.Identifier{t.Table}
	if t.Schema != "" {
		name = pgx.Identifier{t.Schema, t.Table}
	}
	tbl, err := lookupTable(ctx, db, name.Sanitize())
	if err != nil {
		return err
	}
	pk, idk, err := primaryKey(ctx, db, tbl)
	if err != nil {
		return err
	}
	colType, err := countColumn(ctx, db, tbl, t.Column, pk)
	if err != nil {
		return err
	}
	t.kind = idk
	t.pkName = pk.name
	t.columnType = colType
	t.qualified = tbl.schema + "." + tbl.table + "." + t.Column
	t.update = updateSQL(pgx.Identifier{tbl.schema, tbl.table}.Sanitize(), pgx.Identifier{t.Column}.Sanitize(),
		pgx.Identifier{pk.name}.Sanitize(), idk.arrayType())
	t.lock = lockSQL(pgx.Identifier{tbl.schema, tbl.table}.Sanitize(), pgx.Identifier{pk.name}.Sanitize(), idk.arrayType())
	t.resolved = true
	return nil
}

// table is a target's table as the catalog has it.
type table struct {
	oid           uint32
	schema, table string
	// name is the table as ROLLUP_TARGETS named it, quoted, for errors.
	name string
}

// column is one column of a table's primary key.
type column struct{ name, typ string }

// lookupTable finds the table name (quoted) names through the
// search_path, and checks it is a table the rollup's role may read and
// update.
func lookupTable(ctx context.Context, db Querier, name string) (table, error) {
	tbl := table{name: name}
	var (
		kind                   string
		canUpdate, canSelectIt bool
	)
	err := db.QueryRow(ctx, `
SELECT c.oid, n.nspname, c.relname, c.relkind::text,
       has_table_privilege(c.oid, 'UPDATE'), has_table_privilege(c.oid, 'SELECT')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass($1)`, name).Scan(&tbl.oid, &tbl.schema, &tbl.table, &kind, &canUpdate, &canSelectIt)
	if errors.Is(err, pgx.ErrNoRows) {
		return tbl, fmt.Errorf("table %s does not exist", name)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "3F000" { // invalid_schema_name
		return tbl, fmt.Errorf("table %s does not exist: %s", name, pgErr.Message)
	}
	if err != nil {
		return tbl, fmt.Errorf("look up table %s: %w", name, err)
	}
	if kind != "r" && kind != "p" {
		return tbl, fmt.Errorf("%s is not a table (relkind %q)", name, kind)
	}
	if !canUpdate || !canSelectIt {
		return tbl, fmt.Errorf("the rollup's database role may not SELECT and UPDATE %s", name)
	}
	return tbl, nil
}

// primaryKey returns tbl's primary key, which must be a single column of
// a type {id} can be parsed as, and how {id} is parsed.
func primaryKey(ctx context.Context, db Querier, tbl table) (column, idKind, error) {
	rows, err := db.Query(ctx, `
SELECT a.attname, format_type(a.atttypid, NULL)
FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
WHERE i.indrelid = $1 AND i.indisprimary
ORDER BY array_position(i.indkey, a.attnum)`, tbl.oid)
	if err != nil {
		return column{}, 0, fmt.Errorf("look up the primary key of %s: %w", tbl.name, err)
	}
	pk, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		err := r.Scan(&c.name, &c.typ)
		return c, err
	})
	if err != nil {
		return column{}, 0, fmt.Errorf("look up the primary key of %s: %w", tbl.name, err)
	}
	switch len(pk) {
	case 0:
		return column{}, 0, fmt.Errorf("%s has no primary key; {id} must name one row", tbl.name)
	case 1:
	default:
		names := make([]string, len(pk))
		for i, c := range pk {
			names[i] = c.name
		}
		return column{}, 0, fmt.Errorf("%s has a composite primary key (%s); a target needs a single-column primary key", tbl.name, strings.Join(names, ", "))
	}
	idk, ok := idKinds[pk[0].typ]
	if !ok {
		return column{}, 0, fmt.Errorf("primary key %s of %s is %s; {id} can be parsed as smallint, integer, bigint, uuid, text or character varying", pk[0].name, tbl.name, pk[0].typ)
	}
	return pk[0], idk, nil
}

// countColumn returns the type of tbl's column col, which must exist,
// hold an exact number, and be neither generated nor the key pk.
func countColumn(ctx context.Context, db Querier, tbl table, col string, pk column) (string, error) {
	var (
		colType   string
		generated bool
	)
	err := db.QueryRow(ctx, `
SELECT format_type(a.atttypid, NULL), a.attgenerated <> ''
FROM pg_attribute a
WHERE a.attrelid = $1 AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped`, tbl.oid, col).Scan(&colType, &generated)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("column %s does not exist in %s", pgx.Identifier{col}.Sanitize(), tbl.name)
	}
	if err != nil {
		return "", fmt.Errorf("look up column %s of %s: %w", col, tbl.name, err)
	}
	switch {
	case !countTypes[colType]:
		return "", fmt.Errorf("column %s is %s; a count goes in smallint, integer, bigint or numeric", col, colType)
	case generated:
		return "", fmt.Errorf("column %s is generated; it cannot be added to", col)
	case col == pk.name:
		return "", fmt.Errorf("column %s is the primary key", col)
	}
	return colType, nil
}

// updateSQL adds $2 (numeric[]) to col of the rows of tbl whose key pk is
// in $1 (text[], cast to the key's type), in key order, and returns the
// ids that named no row. The rows are locked in primary key order first,
// so two folds, or a fold and an app updating rows in key order, take
// them in one order; the update then only touches rows it holds. A NULL
// column counts as 0. Every name here is quoted by the caller; key text
// only ever arrives in $1.
func updateSQL(tbl, col, pk, arrayType string) string {
	return fmt.Sprintf(`
WITH d AS MATERIALIZED (
    SELECT id, n FROM unnest($1::text[]::%[4]s, $2::numeric[]) AS d(id, n)
), l AS MATERIALIZED (
    SELECT t.%[3]s AS id FROM %[1]s AS t
    WHERE t.%[3]s IN (SELECT id FROM d)
    ORDER BY t.%[3]s
    FOR NO KEY UPDATE OF t
), u AS (
    UPDATE %[1]s AS t SET %[2]s = coalesce(t.%[2]s, 0) + d.n
    FROM d JOIN l USING (id)
    WHERE t.%[3]s = l.id
    RETURNING t.%[3]s AS id
)
SELECT d.id::text FROM d WHERE NOT EXISTS (SELECT FROM u WHERE u.id = d.id)`, tbl, col, pk, arrayType)
}

// lockSQL locks, in id order, the rows of the ids ($1, text[]) the
// update will change, as the update's own lock does, and returns nothing.
func lockSQL(tbl, pk, arrayType string) string {
	return fmt.Sprintf(`
SELECT FROM %[1]s AS t
WHERE t.%[2]s IN (SELECT unnest($1::text[]::%[3]s))
ORDER BY t.%[2]s
FOR NO KEY UPDATE OF t`, tbl, pk, arrayType)
}

// LockSQL is the statement that takes, ahead of UpdateSQL, the row locks
// it needs for the same ids, so a fold waits for the app's locks before
// it holds any slot row (a writer of the key may need that row). Resolve
// must have run.
func (t *Target) LockSQL() string {
	if !t.resolved {
		panic("BUG: targets: LockSQL before Resolve")
	}
	return t.lock
}

// Qualified is the column found in the catalog: schema.table.column.
func (t *Target) Qualified() string { return t.qualified }

// UpdateSQL is the statement a fold runs for this target with the ids
// (text[], each from ID) and amounts (numeric[]) of one chunk; it returns
// the ids that named no row. Resolve must have run.
func (t *Target) UpdateSQL() string {
	if !t.resolved {
		panic("BUG: targets: UpdateSQL before Resolve")
	}
	return t.update
}
