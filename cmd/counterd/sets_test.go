package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/counterd/counterd/internal/pgtest"
)

// SADD and SREM reply what their round really did, once it committed: a
// retried SADD replies 0, an SREM of a non-member 0; the cardinality is
// the key's total, as GET and counter_totals read it.
func TestSetsRepliesExact(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	c := client(t, d.socket)
	const key = "post:1:likes"
	f := func(want string, args ...any) {
		t.Helper()
		if got := reply(t, c, args...); got != want {
			t.Fatalf("%v: got %s; want %s", args, got, want)
		}
	}
	f("2", "SADD", key, "user:1", "user:2")
	f("0", "SADD", key, "user:1") // a retry
	f("1", "SADD", key, "user:3", "user:3")
	f("1", "SREM", key, "user:1", "user:9")
	f("0", "SREM", key, "user:1")
	f("2", "SCARD", key)
	f("2", "GET", key)
	f("0", "SISMEMBER", key, "user:1")
	f("1", "SISMEMBER", key, "user:2")
	f("[0 1 1]", "SMISMEMBER", key, "user:1", "user:2", "user:3")
	if got := total(t, db, key); got != 2 {
		t.Fatalf("total %d; want 2", got)
	}
	if got := setRows(t, db, key); got != 2 {
		t.Fatalf("%d member rows; want 2", got)
	}
}

// Two daemons toggling the same members at once: each reply is what its
// round did in commit order, so the replies net to the cardinality, which
// equals the member rows stored.
func TestSetsToggleAcrossDaemons(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	env := []string{"COUNTERD_FLUSH_INTERVAL=20ms"}
	ds := []*daemon{startDaemon(t, db, env...), startDaemon(t, db, env...)}
	const key, members, toggles = "post:2:likes", 3, 10
	var mu sync.Mutex
	var net int64
	var wg sync.WaitGroup
	for _, d := range ds {
		for m := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := client(t, d.socket)
				for i := range toggles {
					cmd := "SADD"
					if i%2 == 1 {
						cmd = "SREM"
					}
					n, err := c.Do(context.Background(), cmd, key, fmt.Sprintf("user:%d", m)).Int64()
					if err != nil {
						t.Errorf("%s: %v", cmd, err)
						return
					}
					if cmd == "SREM" {
						n = -n
					}
					mu.Lock()
					net += n
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	rows := setRows(t, db, key)
	if got := total(t, db, key); got != net || got != rows {
		t.Fatalf("total %d, replies net %d, member rows %d; want all equal", got, net, rows)
	}
	if got := reply(t, client(t, ds[0].socket), "SCARD", key); got != strconv.FormatInt(rows, 10) {
		t.Fatalf("SCARD %s; want %d", got, rows)
	}
}

// setRows counts key's member rows.
func setRows(t *testing.T, db *pgtest.DB, key string) int64 {
	t.Helper()
	var n int64
	if err := db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM counter_set_members WHERE key = $1 AND added_at IS NOT NULL`, key).Scan(&n); err != nil {
		t.Fatalf("count member rows: %v", err)
	}
	return n
}

// A pipeline of SADD and SREM of one member each joins the connection's
// group and waits for one round's commit together, not one commit per
// command in turn; each reply is still what the round decided for its
// operation, in the pipeline's order (a repeat replies 0), under either
// I/O mode.
func TestSetsPipelineSharesCommit(t *testing.T) {
	t.Parallel()
	for _, io := range []string{"loop", "goroutines"} {
		t.Run(io, func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t, pgtest.Options{})
			d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h", "COUNTERD_IO="+io)
			c := client(t, d.socket)
			const key, members = "post:5:likes", 8
			rounds := metric(t, d, "counterd_flushes_total")
			pipe := c.Pipeline()
			var want []int64
			for range 2 { // new, then repeats
				for m := range members {
					pipe.SAdd(context.Background(), key, fmt.Sprintf("user:%d", m))
				}
			}
			pipe.SRem(context.Background(), key, "user:0")
			for i := range 2 * members {
				want = append(want, int64(1-i/members))
			}
			want = append(want, 1)
			cmds, err := pipe.Exec(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for i, cmd := range cmds {
				n, err := cmd.(interface{ Result() (int64, error) }).Result()
				if err != nil || n != want[i] {
					t.Fatalf("%v: got %d, %v; want %d", cmd.Args(), n, err, want[i])
				}
			}
			if got := metric(t, d, "counterd_flushes_total") - rounds; got < 1 || got > 3 {
				t.Fatalf("%d rounds committed for a pipeline of %d set operations; want 1 to 3 (one shared wait)", int(got), len(want))
			}
			if got, rows := total(t, db, key), setRows(t, db, key); got != members-1 || rows != members-1 {
				t.Fatalf("total %d, member rows %d; want %d", got, rows, members-1)
			}
		})
	}
}

// DEL of a set empties it: its members and its cardinality go together,
// and a member added after the DEL is new again. SET of a set key makes
// it a counter of that value, with no members.
func TestSetsDel(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	c := client(t, d.socket)
	const key = "post:7:likes"
	f := func(want string, args ...any) {
		t.Helper()
		if got := reply(t, c, args...); got != want {
			t.Fatalf("%v: got %s; want %s", args, got, want)
		}
	}
	f("3", "SADD", key, "user:1", "user:2", "user:3")
	f("1", "DEL", key)
	f("0", "SCARD", key)
	f("OK", "FLUSH")
	f("0", "SISMEMBER", key, "user:1")
	if got, rows := total(t, db, key), setRows(t, db, key); got != 0 || rows != 0 {
		t.Fatalf("after DEL: total %d, member rows %d; want 0, 0", got, rows)
	}
	f("1", "SADD", key, "user:1")
	f("1", "SCARD", key)
	f("OK", "SET", key, "7")
	f("OK", "FLUSH")
	f("0", "SISMEMBER", key, "user:1")
	if got, rows := total(t, db, key), setRows(t, db, key); got != 7 || rows != 0 {
		t.Fatalf("after SET: total %d, member rows %d; want 7, 0", got, rows)
	}
}
