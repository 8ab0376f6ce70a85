package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/cluster"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// TestClusterFoldKilledOnOnePartition: rollup with ROLLUP_CLUSTER folds
// every partition on its own. Killed while partition 1's fold waits on a
// lock (partition 0's done), then run again, every key's total is exact
// on its partition and no slot row is left.
func TestClusterFoldKilledOnOnePartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.NewCluster(t, 2, pgtest.Options{})
	parts := make([]cluster.Part, 2)
	for i, db := range c.Parts {
		s, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4})
		if err != nil {
			t.Fatal(err)
		}
		parts[i] = s
	}
	st, err := cluster.New(parts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("post:%d", i)
	}
	for seq := uint64(1); seq <= 20; seq++ {
		var batch []change.Change
		for i, k := range keys {
			n := int64(i%7) + int64(seq)
			batch = append(batch, change.Change{Key: k, Kind: change.Total, Delta: n})
			want[k] += n
		}
		if _, err := st.ApplyOnce(ctx, store.BatchID{Identity: store.Identity{Instance: "w", Generation: "g"}, Seq: seq}, batch); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"DATABASE_URL=" + c.Proxy.URL, "ROLLUP_CLUSTER=" + c.Name, "ROLLUP_CHUNK=10", "ROLLUP_LOCK_TIMEOUT=0"}

	// Partition 1's folded table is held, so its fold waits there.
	tx, err := c.Parts[1].Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE counters IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "once")
	cmd.Env = env
	cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Partition 0 folds everything while partition 1 waits.
	deadline := time.Now().Add(2 * time.Minute)
	for slotRows(t, c.Parts[0]) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("partition 0 not folded while partition 1 waited\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := slotRows(t, c.Parts[1]); n == 0 {
		t.Fatal("partition 1 folded through the lock")
	}
	_ = cmd.Process.Kill()
	<-done
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	again := exec.Command(binary, "once")
	again.Env = env
	if b, err := again.CombinedOutput(); err != nil {
		t.Fatalf("rollup once: %v\n%s", err, b)
	}
	for p, db := range c.Parts {
		if n := slotRows(t, db); n != 0 {
			t.Errorf("partition %d: %d slot rows left", p, n)
		}
		rows, err := db.Pool.Query(ctx, `SELECT key, total FROM counters`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for rows.Next() {
			var k string
			var n int64
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			got[k] = n
		}
		rows.Close()
		for _, k := range keys {
			mine := cluster.Partition(k, 2) == p
			if mine && got[k] != want[k] || !mine && got[k] != 0 {
				t.Errorf("partition %d: %s folded to %d; want %d (its partition: %d)", p, k, got[k], want[k], cluster.Partition(k, 2))
			}
		}
	}
}

func slotRows(t *testing.T, db *pgtest.DB) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM counter_slots`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// ROLLUP_TARGETS with ROLLUP_CLUSTER is refused at start.
func TestClusterRefusesTargets(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "once")
	cmd.Env = []string{"DATABASE_URL=postgres://nobody@/none?host=/nonexistent", "ROLLUP_CLUSTER=c", "ROLLUP_TARGETS=post:{id}:likes=posts.like_count"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "cannot be used with ROLLUP_CLUSTER") {
		t.Errorf("rollup once with both: %v\n%s; want exit 2 naming ROLLUP_CLUSTER", err, out)
	}
}
