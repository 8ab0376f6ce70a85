package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrBadLayout is a declaration counterd must not run on: two partitions
// on one installation, the proxy's own database and schema among its
// partitions, or partitions whose count or order changed since counterd
// last ran on them.
var ErrBadLayout = errors.New("bad cluster layout")

// place is the counterd installation a connection lands on (the id
// counterd_installation holds, one per migrated schema: unlike a host
// name it tells two servers apart, and needs no superuser), with its
// database and schema for messages. The proxy's is empty unless it was
// migrated.
type place struct{ install, database, schema string }

func (p place) String() string {
	return fmt.Sprintf("database %q, schema %q (installation %s)", p.database, p.schema, p.install)
}

func placeOf(ctx context.Context, pool *pgxpool.Pool) (place, error) {
	var p place
	var migrated bool
	err := pool.QueryRow(ctx, `SELECT to_regclass('counterd_installation') IS NOT NULL, current_database(), current_schema()`).
		Scan(&migrated, &p.database, &p.schema)
	if err != nil || !migrated {
		return p, err
	}
	err = pool.QueryRow(ctx, `SELECT id::text FROM counterd_installation`).Scan(&p.install)
	return p, err
}

// CheckLayout checks the partitions (migrated, in declaration order)
// against the proxy and each other, and against the partition each
// recorded being (counterd_partition), recording it on a partition that
// has none. Two partitions on one installation would share one round
// watermark (the second part of every round would be skipped as done); a
// partition that is the proxy would have its counter_totals replaced by
// the proxy's, which calls itself; a changed count or order moves keys
// to partitions that do not hold them.
func CheckLayout(ctx context.Context, proxy *pgxpool.Pool, parts []*pgxpool.Pool) error {
	pp, err := placeOf(ctx, proxy)
	if err != nil {
		return fmt.Errorf("read the proxy's database: %w", err)
	}
	seen := make(map[string]int, len(parts))
	for i, pool := range parts {
		p, err := placeOf(ctx, pool)
		if err != nil {
			return fmt.Errorf("partition %d: read its installation: %w", i, err)
		}
		if p.install == pp.install { // a partition is always migrated here
			return fmt.Errorf("%w: partition %d is the proxy's own %s; declare partitions in other databases", ErrBadLayout, i, p)
		}
		if j, ok := seen[p.install]; ok {
			return fmt.Errorf("%w: partitions %d and %d are both %s; each needs a database (or schema) of its own", ErrBadLayout, j, i, p)
		}
		seen[p.install] = i
	}
	// Check every recorded place first, and record the missing ones only
	// then, so a refused declaration records nothing.
	n := len(parts)
	check := func(i, idx, count int) error {
		if idx != i || count != n {
			return fmt.Errorf("%w: partition %d of %d was partition %d of %d when counterd last ran on it: the declaration changed, which moves keys to partitions that do not hold them (docs/scaling.md); restore it, or move the data first and then delete counterd_partition's row on every partition", ErrBadLayout, i, n, idx, count)
		}
		return nil
	}
	const read = `SELECT idx, count FROM counterd_partition`
	var missing []int
	for i, pool := range parts {
		var idx, count int
		err := pool.QueryRow(ctx, read).Scan(&idx, &count)
		if errors.Is(err, pgx.ErrNoRows) {
			missing = append(missing, i)
			continue
		}
		if err != nil {
			return fmt.Errorf("partition %d: read its place: %w", i, err)
		}
		if err := check(i, idx, count); err != nil {
			return err
		}
	}
	for _, i := range missing {
		var idx, count int
		// A daemon starting beside this one may record it first: read
		// back whichever row stands.
		if _, err := parts[i].Exec(ctx, `INSERT INTO counterd_partition (idx, count) VALUES ($1, $2) ON CONFLICT (one) DO NOTHING`, i, n); err != nil {
			return fmt.Errorf("partition %d: record its place: %w", i, err)
		}
		if err := parts[i].QueryRow(ctx, read).Scan(&idx, &count); err != nil {
			return fmt.Errorf("partition %d: read its place: %w", i, err)
		}
		if err := check(i, idx, count); err != nil {
			return err
		}
	}
	return nil
}
