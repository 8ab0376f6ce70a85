package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/cluster"
	"github.com/counterd/counterd/internal/pgtest"
)

// startCluster runs counterd on a new PL/Proxy cluster of n partitions.
// The partitions are not migrated: the daemon migrates each.
func startCluster(t *testing.T, n int, extra ...string) (*pgtest.Cluster, *daemon) {
	t.Helper()
	c := pgtest.NewCluster(t, n, pgtest.Options{NoMigrate: true, MaxConns: 4})
	d := startDaemon(t, c.Proxy, append([]string{"COUNTERD_CLUSTER=" + c.Name}, extra...)...)
	return c, d
}

// partTotals returns each key's total as partition p's own SQL function
// counter_totals reads it.
func partTotals(t *testing.T, c *pgtest.Cluster, p int, keys []string) map[string]int64 {
	t.Helper()
	rows, err := c.Parts[p].Pool.Query(context.Background(), `SELECT key, total FROM counter_totals($1)`, keys)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		out[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClusterTotalsExact counts through a cluster of 2 and of 4
// partitions: GET is exact, and every key's rows are on partition
// hashtext(key) & (n-1) and nowhere else.
func TestClusterTotalsExact(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%dparts", n), func(t *testing.T) {
			t.Parallel()
			c, d := startCluster(t, n)
			rc := client(t, d.socket)
			ctx := context.Background()
			keys := make([]string, 64)
			want := map[string]int64{}
			for i := range keys {
				keys[i] = fmt.Sprintf("post:%d", i)
			}
			pipe := rc.Pipeline()
			for i := range 2000 {
				k := keys[i*7%len(keys)]
				pipe.IncrBy(ctx, k, int64(i%5+1))
				want[k] += int64(i%5 + 1)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			flush(t, d.socket)
			for _, k := range keys {
				got, err := rc.Get(ctx, k).Int64()
				if err != nil || got != want[k] {
					t.Errorf("GET %s = %d, %v; want %d", k, got, err, want[k])
				}
			}
			for p := range n {
				got := partTotals(t, c, p, keys)
				for _, k := range keys {
					mine := cluster.Partition(k, n) == p
					switch {
					case mine && got[k] != want[k]:
						t.Errorf("partition %d has %s = %d; want %d", p, k, got[k], want[k])
					case !mine && got[k] != 0:
						t.Errorf("partition %d has %s = %d; it is partition %d's", p, k, got[k], cluster.Partition(k, n))
					}
				}
			}
		})
	}
}

// TestClusterKillMidRound kills counterd while one partition's part of a
// round waits on a lock and the other partitions have committed theirs:
// after a restart every total is exact, nothing lost or counted twice.
func TestClusterKillMidRound(t *testing.T) {
	t.Parallel()
	c, d := startCluster(t, 2, "COUNTERD_FLUSH_INTERVAL=1h", "COUNTERD_LOCK_TIMEOUT=0", "COUNTERD_STATEMENT_TIMEOUT=0")
	rc := client(t, d.socket)
	ctx := context.Background()
	keys := make([]string, 32)
	want := map[string]int64{}
	for i := range keys {
		keys[i] = fmt.Sprintf("k:%d", i)
		if err := rc.IncrBy(ctx, keys[i], int64(i+1)).Err(); err != nil {
			t.Fatal(err)
		}
		want[keys[i]] = int64(i + 1)
	}
	// Hold partition 1's slot table, then start a round.
	tx, err := c.Parts[1].Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE counter_slots, counterd_instances IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	go func() { _ = client(t, d.socket).Do(context.Background(), "FLUSH").Err() }()
	// Partition 0 commits its part.
	var mine []string
	for _, k := range keys {
		if cluster.Partition(k, 2) == 0 {
			mine = append(mine, k)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := partTotals(t, c, 0, mine)
		if got[mine[0]] == want[mine[0]] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition 0 did not commit its part: %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.kill()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	d.start()
	flush(t, d.socket)
	rc = client(t, d.socket)
	for _, k := range keys {
		got, err := rc.Get(ctx, k).Int64()
		if err != nil || got != want[k] {
			t.Errorf("after the restart GET %s = %d, %v; want %d", k, got, err, want[k])
		}
	}
	for p := range 2 {
		for k, n := range partTotals(t, c, p, keys) {
			if cluster.Partition(k, 2) == p && n != want[k] {
				t.Errorf("partition %d: %s = %d; want %d", p, k, n, want[k])
			}
		}
	}
}
