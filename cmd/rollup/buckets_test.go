package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
)

// rollup once, run again and again while writers write bucket changes,
// moves every one into counter_bucket_rows exactly once, and deletes the
// buckets whose retention has passed (and only those).
func TestOnceFoldsAndExpiresBuckets(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	store, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4, Retention: func(string, change.Kind) (time.Duration, bool) {
		return 48 * time.Hour, true
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().Unix()
	hour := now - now%3600
	old := hour - 30*24*3600 // kept until 2 days after it ended: long gone
	if _, err := store.Apply(ctx, []change.Change{
		{Kind: change.Hour, Key: "post:old", Bucket: old, Delta: 9},
		{Kind: change.Hour, Key: "post:1", Bucket: old, Delta: 9},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		written int64
		werr    error
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				batch := []change.Change{
					{Kind: change.Hour, Key: fmt.Sprintf("post:%d", i%5), Bucket: hour, Delta: 2},
					{Kind: change.Minute, Key: fmt.Sprintf("post:x%d", w), Bucket: now - now%60, Delta: 1},
				}
				_, err := store.Apply(ctx, batch)
				mu.Lock()
				if err != nil {
					werr = errors.Join(werr, err)
				} else {
					written += 3
				}
				mu.Unlock()
			}
		})
	}
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(halt)
	env := []string{"DATABASE_URL=" + db.URL, "ROLLUP_CHUNK=3", "ROLLUP_LOG_LEVEL=debug"}
	once := func() string {
		t.Helper()
		cmd := exec.Command(binary, "once")
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil {
			t.Fatalf("rollup once: %v\n%s%s", err, out, stderr.String())
		}
		return stderr.String()
	}
	for range 4 {
		once()
	}
	halt()
	if werr != nil {
		t.Fatal(werr)
	}
	log := once()
	if !strings.Contains(log, "bucket_slots_folded=") || !strings.Contains(log, "expired_buckets=") {
		t.Errorf("rollup log does not report buckets:\n%s", log)
	}
	if got := sum(t, db, "counter_bucket_slots", "count"); got != 0 {
		t.Errorf("bucket slot rows left after a quiet pass: sum %d; want 0", got)
	}
	if got := sum(t, db, "counter_bucket_rows", "total"); got != written {
		t.Errorf("bucket rows hold %d; want the %d written to live buckets (old ones expired)", got, written)
	}
	var oldRows int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counter_buckets WHERE bucket_start < now() - interval '2 days'`).Scan(&oldRows); err != nil {
		t.Fatal(err)
	}
	if oldRows != 0 {
		t.Errorf("%d buckets past their retention are left", oldRows)
	}
}
