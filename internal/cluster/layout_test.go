package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/pgtest"
)

// CheckLayout refuses what a PL/Proxy declaration allows but counterd
// cannot run on, each found by an adversarial trial: two partitions on
// one installation (half of every round was skipped as already
// committed: acknowledged increments lost), the proxy's own schema as a
// partition (its counter_totals was replaced by the proxy's, which
// called itself until the server ran out of connections), and a count or
// order changed since counterd last ran (keys read and written on
// partitions that do not hold them). Before, each was accepted.
func TestCheckLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.NewCluster(t, 4, pgtest.Options{})
	p := make([]*pgxpool.Pool, len(c.Parts))
	for i, part := range c.Parts {
		p[i] = part.Pool
	}
	bad := func(name string, proxy *pgxpool.Pool, parts []*pgxpool.Pool, want string) {
		t.Helper()
		err := CheckLayout(ctx, proxy, parts)
		if !errors.Is(err, ErrBadLayout) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want ErrBadLayout saying %q", name, err, want)
		}
	}
	bad("two partitions on one schema", c.Proxy.Pool, []*pgxpool.Pool{p[0], p[0]}, "partitions 0 and 1 are both")
	bad("the proxy as a partition", p[1], []*pgxpool.Pool{p[0], p[1]}, "partition 1 is the proxy's own")
	if err := CheckLayout(ctx, c.Proxy.Pool, p[:2]); err != nil {
		t.Fatalf("the first run on two partitions: %v", err)
	}
	if err := CheckLayout(ctx, c.Proxy.Pool, p[:2]); err != nil {
		t.Fatalf("the same two again: %v", err)
	}
	bad("the two swapped", c.Proxy.Pool, []*pgxpool.Pool{p[1], p[0]}, "partition 0 of 2 was partition 1 of 2")
	bad("two more added", c.Proxy.Pool, p, "partition 0 of 4 was partition 0 of 2")
	// A refused declaration records nothing on its new partitions: they
	// can still join a right one.
	var n int
	if err := p[2].QueryRow(ctx, `SELECT count(*) FROM counterd_partition`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("partition 2 after a refused declaration: %d rows, %v; want none", n, err)
	}
}
