package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
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

// TestClusterPartitionOutage takes one partition's server down for 20 s
// under load: increments keep being acknowledged, the other partition
// keeps committing its keys, /readyz and counterd_partition_behind name
// the partition, and once it is back every total is exact.
func TestClusterPartitionOutage(t *testing.T) {
	t.Parallel()
	srv := pgtest.StartServer(t)
	c := pgtest.NewCluster(t, 2, pgtest.Options{NoMigrate: true, MaxConns: 4, PartURLs: []string{"", srv.URL}})
	d := startDaemon(t, c.Proxy, "COUNTERD_CLUSTER="+c.Name, "COUNTERD_FLUSH_INTERVAL=50ms", "COUNTERD_FLUSH_TIMEOUT=2s")
	ctx := context.Background()
	var keys [2][]string
	for i := 0; len(keys[0]) < 8 || len(keys[1]) < 8; i++ {
		k := fmt.Sprintf("v:%d", i)
		p := cluster.Partition(k, 2)
		keys[p] = append(keys[p], k)
	}
	all := append(slices.Clone(keys[0]), keys[1]...)
	want := map[string]int64{}
	rc := client(t, d.socket)
	load := func(rounds int) {
		t.Helper()
		for range rounds {
			pipe := rc.Pipeline()
			for _, k := range all {
				pipe.Incr(ctx, k)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatalf("INCR while partition 1 is down: %v", err)
			}
			for _, k := range all {
				want[k]++
			}
		}
	}
	load(10)
	flush(t, d.socket)

	srv.Stop("fast")
	down := time.Now()
	load(10)
	// Once partition 1 is known to be behind, what is acknowledged from
	// then on is in rounds after the one it holds back: partition 0
	// commits those too.
	waitNotReady(t, d, "behind: partition 1")
	load(5)
	for {
		got := partTotals(t, c, 0, keys[0])
		if got[keys[0][0]] == want[keys[0][0]] {
			break
		}
		if time.Since(down) > 2*time.Minute {
			t.Fatalf("partition 0 did not commit while partition 1 was down: %d of %d", got[keys[0][0]], want[keys[0][0]])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m := httpGet(t, "http://"+d.metricsAddr()+"/metrics"); !strings.Contains(m, `counterd_partition_behind{partition="1"} 1`) ||
		!strings.Contains(m, `counterd_partition_behind{partition="0"} 0`) {
		t.Errorf("metrics while partition 1 is down:\n%s", m)
	}
	// FLUSH cannot finish, and says why: before, only "context deadline
	// exceeded", while /readyz and the log named the partition.
	if err := client(t, d.socket).Do(context.Background(), "FLUSH").Err(); err == nil ||
		!strings.Contains(err.Error(), "flush not confirmed") || !strings.Contains(err.Error(), "behind: partition 1") {
		t.Errorf("FLUSH while partition 1 is down: %v; want flush not confirmed, naming partition 1", err)
	}
	// Under load for the rest of the 20 s.
	for time.Since(down) < 20*time.Second {
		load(1)
		time.Sleep(100 * time.Millisecond) // pacing the load over the outage, not a wait for an event
	}
	srv.Start()
	flush(t, d.socket)
	for _, k := range all {
		if got, err := rc.Get(ctx, k).Int64(); err != nil || got != want[k] {
			t.Errorf("GET %s = %d, %v; want %d", k, got, err, want[k])
		}
	}
	for p := range 2 {
		got := partTotals(t, c, p, keys[p])
		for _, k := range keys[p] {
			if got[k] != want[k] {
				t.Errorf("partition %d: %s = %d; want %d", p, k, got[k], want[k])
			}
		}
	}
	waitReady(t, d, "")
}

// waitNotReady polls /readyz until it answers 503 with a body naming
// substr, for up to a minute.
func waitNotReady(t *testing.T, d *daemon, substr string) {
	t.Helper()
	var last string
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + d.metricsAddr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), substr) {
			return
		}
		last = fmt.Sprintf("%s %q", resp.Status, body)
	}
	t.Fatalf("/readyz: %s; want 503 naming %q", last, substr)
}

// TestClusterReadsAndBudgets: budgets on several partitions sell out
// exactly under concurrent TAKEs from two daemons, and the proxy's read
// functions (counter_totals, counter_top, counter_uniques, budget_totals)
// answer over the partitions as one database would.
func TestClusterReadsAndBudgets(t *testing.T) {
	t.Parallel()
	const n = 4
	c := pgtest.NewCluster(t, n, pgtest.Options{NoMigrate: true, MaxConns: 4})
	d1 := startDaemon(t, c.Proxy, "COUNTERD_CLUSTER="+c.Name)
	d2 := startDaemon(t, c.Proxy, "COUNTERD_CLUSTER="+c.Name)
	ctx := context.Background()

	// Budgets: 8 budgets (spread over the partitions) of 300 units; 2
	// daemons × 8 clients TAKE until each refuses.
	budgets := make([]string, 8)
	for i := range budgets {
		budgets[i] = fmt.Sprintf("coupon:%d", i)
		if err := client(t, d1.socket).Do(ctx, "BUDGET", budgets[i], 300).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	granted := map[string]int64{}
	var wg sync.WaitGroup
	for _, d := range []*daemon{d1, d2} {
		for w := range 8 {
			rc := client(t, d.socket)
			wg.Go(func() {
				for _, b := range budgets {
					for range 1000 { // bounded: 300 units per budget
						got, err := rc.Do(ctx, "TAKE", b, 1+w%3).Int64()
						if err != nil {
							t.Errorf("TAKE %s: %v", b, err)
							return
						}
						if got == 0 {
							break
						}
						mu.Lock()
						granted[b] += got
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	flush(t, d1.socket)
	flush(t, d2.socket)

	// Counts and members.
	rc := client(t, d1.socket)
	want := map[string]int64{}
	for i := range 20 {
		k := fmt.Sprintf("post:%d", i)
		want[k] = int64(i*i + 1)
		if err := rc.IncrBy(ctx, k, want[k]).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rc.PFAdd(ctx, "u:"+k, "a", "b", k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, d1.socket)

	proxy := c.Proxy.Pool
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	got := map[string]int64{}
	rows, _ := proxy.Query(ctx, `SELECT key, total FROM counter_totals($1)`, keys)
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		got[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("counter_totals(keys) through the proxy: %v", err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("counter_totals(keys) through the proxy: %s = %d; want %d", k, got[k], v)
		}
	}
	var top []string
	rows, _ = proxy.Query(ctx, `SELECT key FROM counter_top(3, 'post:')`)
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		top = append(top, k)
	}
	if err := rows.Err(); err != nil || !slices.Equal(top, []string{"post:19", "post:18", "post:17"}) {
		t.Errorf("counter_top(3) through the proxy: %v, %v", top, err)
	}
	var est float64
	if err := proxy.QueryRow(ctx, `SELECT estimate FROM counter_uniques(ARRAY['u:post:3'])`).Scan(&est); err != nil || est != 3 {
		t.Errorf("counter_uniques through the proxy: %v, %v; want 3", est, err)
	}
	var all int64
	if err := proxy.QueryRow(ctx, `SELECT count(*) FROM counter_totals WHERE key LIKE 'post:%'`).Scan(&all); err != nil || all != 20 {
		t.Errorf("the counter_totals view through the proxy: %d keys, %v; want 20", all, err)
	}
	for _, b := range budgets {
		var g, total int64
		if err := proxy.QueryRow(ctx, `SELECT granted, total FROM budget_totals WHERE key = $1`, b).Scan(&g, &total); err != nil {
			t.Fatal(err)
		}
		if granted[b] > 300 {
			t.Errorf("%s: %d units granted of 300: overspent", b, granted[b])
		}
		if g != granted[b] {
			t.Errorf("%s: budget_totals through the proxy says %d granted; clients got %d", b, g, granted[b])
		}
	}
}
