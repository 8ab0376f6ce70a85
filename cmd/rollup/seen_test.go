package main

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// rollup once deletes INCRONCE seen entries ROLLUP_SEEN_SLACK past their
// window (a day by default; an hour here) and keeps the others.
func TestOncePrunesSeen(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	_, err = st.ApplyOnce(ctx, store.BatchID{Identity: store.Identity{Instance: "i"}, Seq: 1}, []change.Change{
		change.OnceView("post:1", 1, now.Add(-10*time.Hour), 8*time.Hour),               // ended 2h ago
		change.OnceView("post:1", 2, now.Add(-8*time.Hour-30*time.Minute), 8*time.Hour), // ended 30m ago
		change.OnceView("post:1", 3, now, 8*time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	rollupOnce := func(env ...string) []int64 {
		t.Helper()
		cmd := exec.Command(binary, "once")
		cmd.Env = append([]string{"DATABASE_URL=" + db.URL}, env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("rollup once: %v\n%s", err, out)
		}
		var left []int64
		rows, err := db.Pool.Query(ctx, `SELECT visitor_hash FROM counter_seen ORDER BY visitor_hash`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v int64
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			left = append(left, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return left
	}
	// The default keeps an entry a day past its window: a daemon that
	// replays a view of visitor 1 hours late still finds it (before, the
	// entry went an hour after its window and such a view counted again).
	if left := rollupOnce(); len(left) != 3 {
		t.Fatalf("seen entries left with the default slack: visitors %v; want [1 2 3]", left)
	}
	if left := rollupOnce("ROLLUP_SEEN_SLACK=1h"); len(left) != 2 || left[0] != 2 || left[1] != 3 {
		t.Fatalf("seen entries left: visitors %v; want [2 3]", left)
	}
	if got := sum(t, db, "counter_totals", "total"); got != 3 {
		t.Fatalf("total %d; want 3 (the prune takes entries, not counts)", got)
	}
}
