package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

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
	f := expectReplies(t, c)
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

// expectReplies returns a check that a command's reply, as reply formats
// it, is want.
func expectReplies(t *testing.T, c *redis.Client) func(want string, args ...any) {
	return func(want string, args ...any) {
		t.Helper()
		if got := reply(t, c, args...); got != want {
			t.Fatalf("%v: got %s; want %s", args, got, want)
		}
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
			// Without the shared wait each command waits for a round of its
			// own (17); with it, a round per group the daemon reads the
			// pipeline in (one, unless the socket hands it over in pieces).
			if got := metric(t, d, "counterd_flushes_total") - rounds; got < 1 || got > float64(len(want)/2) {
				t.Fatalf("%d rounds committed for a pipeline of %d set operations; want 1 to %d (shared waits)", int(got), len(want), len(want)/2)
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
	f := expectReplies(t, c)
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

// SMEMBERS lists a set as stored, in byte order; SSCAN iterates it with
// this daemon's cursors, COUNT members a call, filtered by MATCH, each
// member once; a cursor this daemon did not return is an error.
func TestSetsMembersAndScan(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	c := client(t, d.socket)
	ctx := context.Background()
	const key = "post:8:likes"
	var want []string
	for i := range 25 {
		m := fmt.Sprintf("user:%02d", i)
		want = append(want, m)
		if err := c.SAdd(ctx, key, m).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.SMembers(ctx, key).Result()
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("SMEMBERS: %v, %v; want %v", got, err, want)
	}
	if got, err := c.SMembers(ctx, "post:none").Result(); err != nil || len(got) != 0 {
		t.Fatalf("SMEMBERS of no set: %v, %v; want empty", got, err)
	}
	var seen []string
	cursor, calls := uint64(0), 0
	for {
		page, next, err := c.SScan(ctx, key, cursor, "", 7).Result()
		if err != nil {
			t.Fatal(err)
		}
		seen, cursor, calls = append(seen, page...), next, calls+1
		if cursor == 0 || calls > 10 {
			break
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) || calls != 4 {
		t.Fatalf("SSCAN COUNT 7: %v in %d calls; want %v in 4", seen, calls, want)
	}
	page, next, err := c.SScan(ctx, key, 0, "user:1?", 100).Result()
	if err != nil || next != 0 || len(page) != 10 || page[0] != "user:10" {
		t.Fatalf("SSCAN MATCH user:1?: %v, cursor %d, %v; want user:10..19, cursor 0", page, next, err)
	}
	if err := c.SScan(ctx, key, 12345, "", 10).Err(); err == nil || !strings.Contains(err.Error(), "invalid cursor") {
		t.Fatalf("SSCAN of an unknown cursor: %v; want invalid cursor", err)
	}
}

// A set holds at most 1,000,000 members: an SADD of a new member to a
// full set is refused with an error saying so, and adds nothing; an SREM
// makes room again.
func TestSetsFull(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	c := client(t, d.socket)
	const key = "post:9:likes"
	// The cardinality is the key's total: 999,998 members stand in for
	// the rest, as rows the test writes itself.
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO counter_slots (key, slot, count) VALUES ($1, 0, 999998)`, key); err != nil {
		t.Fatal(err)
	}
	f := func(want string, args ...any) {
		t.Helper()
		v, err := c.Do(context.Background(), args...).Result()
		got := fmt.Sprint(v)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) {
			t.Fatalf("%v: got %s; want %s", args, got, want)
		}
	}
	f("1", "SADD", key, "user:1")
	f("set is full: it holds 1000000 members, the most a set holds; 1 members were not added, 1 were", "SADD", key, "user:2", "user:3")
	f("set is full", "SADD", key, "user:4")
	f("0", "SADD", key, "user:1")
	f("1000000", "SCARD", key)
	f("1", "SREM", key, "user:2")
	f("1", "SADD", key, "user:4")
	f("0", "SISMEMBER", key, "user:3")
	if got := setRows(t, db, key); got != 2 {
		t.Fatalf("%d member rows; want 2 (user:1, user:4)", got)
	}
}

// A set's cardinality is counted in its key's windows too, at each
// operation's accept time: the day's adds less its removes.
func TestSetsWindows(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_WINDOWS=likes:*=hour:2d", "COUNTERD_FLUSH_INTERVAL=1h")
	c := client(t, d.socket)
	const key = "likes:post:3"
	if got := reply(t, c, "SADD", key, "a", "b", "c"); got != "3" {
		t.Fatalf("SADD: %s", got)
	}
	if got := reply(t, c, "SREM", key, "a", "z"); got != "1" {
		t.Fatalf("SREM: %s", got)
	}
	if got := reply(t, c, "COUNT", key, "SINCE", "2h"); !strings.HasPrefix(got, "[2 ") {
		t.Fatalf("COUNT SINCE 2h: %s; want 2", got)
	}
	var buckets int64
	if err := db.Pool.QueryRow(context.Background(),
		`SELECT coalesce(sum(count), 0) FROM counter_bucket_slots WHERE key = $1`, key).Scan(&buckets); err != nil {
		t.Fatal(err)
	}
	if buckets != 2 {
		t.Fatalf("bucket rows sum to %d; want 2", buckets)
	}
}

// Bad input to the set commands gets a clear error and changes nothing;
// a member is any bytes, up to 512 of them.
func TestSetsBadInput(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	c := client(t, d.socket)
	ctx := context.Background()
	const key = "post:11:likes"
	fails := func(want string, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v: %v; want an error saying %q", args, err, want)
		}
	}
	long := strings.Repeat("m", 513)
	fails("set member must be 1..512 bytes", "SADD", key, "")
	fails("set member must be 1..512 bytes", "SADD", key, "ok", long)
	fails("set member must be 1..512 bytes", "SREM", key, long)
	fails("set member must be 1..512 bytes", "SISMEMBER", key, "")
	fails("wrong number of arguments", "SADD", key)
	fails("wrong number of arguments", "SMEMBERS", key, "x")
	fails("invalid cursor", "SSCAN", key, "-1")
	fails("invalid cursor", "SSCAN", key, "abc")
	fails("out of range", "SSCAN", key, "0", "COUNT", "0")
	fails("syntax error", "SSCAN", key, "0", "COUNT")
	fails("syntax error", "SSCAN", key, "0", "LIMIT", "3")
	if got := setRows(t, db, key); got != 0 {
		t.Fatalf("%d member rows after refused commands; want 0", got)
	}
	binary := string([]byte{0, 0xff, '\r', '\n', 'x'})
	max := strings.Repeat("z", 512)
	if got := reply(t, c, "SADD", key, binary, max); got != "2" {
		t.Fatalf("SADD of a binary member and a 512-byte one: %s; want 2", got)
	}
	if got := reply(t, c, "SMISMEMBER", key, binary, max, "z"); got != "[1 1 0]" {
		t.Fatalf("SMISMEMBER: %s; want [1 1 0]", got)
	}
	ms, err := c.SMembers(ctx, key).Result()
	if err != nil || len(ms) != 2 || ms[0] != binary || ms[1] != max {
		t.Fatalf("SMEMBERS: %q, %v; want the binary member, then the 512-byte one", ms, err)
	}
}
