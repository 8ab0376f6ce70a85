package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

// incrN sends n INCRs of key on c, one at a time, and fails on any error.
func incrN(t *testing.T, c *redis.Client, key string, n int) {
	t.Helper()
	for range n {
		if err := c.Incr(context.Background(), key).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func getInt(t *testing.T, c *redis.Client, key string) int64 {
	t.Helper()
	n, err := c.Get(context.Background(), key).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// DEL, SET and EXPIRE with two daemons on one database, made exact by
// pausing B around the change: everything committed when A's change is
// written is replaced (B's increments, flushed before it, and A's own),
// and increments either daemon makes after it count.
func TestResetTwoDaemons(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	da, db2 := startDaemon(t, db), startDaemon(t, db)
	a, b := client(t, da.socket), client(t, db2.socket)
	ctx := context.Background()
	cases := []struct {
		name string
		// change runs the change on A and returns the value it leaves.
		change func(t *testing.T, key string) int64
	}{
		{"DEL", func(t *testing.T, key string) int64 {
			if n, err := a.Del(ctx, key, key+":never").Result(); err != nil || n != 1 {
				t.Fatalf("DEL: got %d, %v; want 1 (one key existed)", n, err)
			}
			return 0
		}},
		{"SET", func(t *testing.T, key string) int64 {
			if err := a.Set(ctx, key, 1000, 0).Err(); err != nil {
				t.Fatal(err)
			}
			return 1000
		}},
		{"EXPIREAT in the past", func(t *testing.T, key string) int64 {
			if n, err := a.ExpireAt(ctx, key, unixTime(1)).Result(); err != nil || !n {
				t.Fatalf("EXPIREAT: got %v, %v; want true", n, err)
			}
			return 0
		}},
		{"EXPIRE, then time passes", func(t *testing.T, key string) int64 {
			if ok, err := a.Expire(ctx, key, 3600e9).Result(); err != nil || !ok {
				t.Fatalf("EXPIRE: got %v, %v; want true", ok, err)
			}
			if ttl := a.TTL(ctx, key).Val(); ttl.Seconds() < 3590 {
				t.Fatalf("TTL: got %v; want about 1h", ttl)
			}
			flush(t, da.socket)
			// The clock is the database's: move the expiry into the past.
			if _, err := db.Pool.Exec(ctx, `UPDATE counter_expiry SET expires_at = now() - interval '1 second' WHERE key = $1`, key); err != nil {
				t.Fatal(err)
			}
			if n := a.TTL(ctx, key).Val(); n != -2 {
				t.Fatalf("TTL of an expired key: got %v; want -2", n)
			}
			return 0
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "k:" + strings.NewReplacer(" ", "_", ",", "").Replace(tc.name)
			incrN(t, a, key, 7)
			incrN(t, b, key, 5)
			flush(t, db2.socket) // B's increments are committed: the change replaces them
			incrN(t, a, key, 3)  // acknowledged before the change: replaced too
			want := tc.change(t, key)
			if got := getInt(t, a, key); got != want {
				t.Fatalf("GET on A right after the change (read your writes): got %d; want %d", got, want)
			}
			flush(t, da.socket) // the change is committed
			if got := getInt(t, b, key); got != want {
				t.Fatalf("GET on B after the change committed: got %d; want %d", got, want)
			}
			incrN(t, a, key, 4)
			incrN(t, b, key, 6)
			flush(t, da.socket)
			flush(t, db2.socket)
			want += 10
			for _, c := range []*redis.Client{a, b} {
				if got := getInt(t, c, key); got != want {
					t.Fatalf("GET after more increments: got %d; want %d", got, want)
				}
			}
			if got := total(t, db, key); got != want {
				t.Fatalf("counter_totals: got %d; want %d", got, want)
			}
		})
	}
}

// The same with B incrementing throughout: the final value is A's
// increments after the DEL plus those of B's committed after the DEL's
// round, which lies between B's increments that started after A's FLUSH
// returned and all of B's.
func TestDelUnderConcurrentIncrements(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	da, db2 := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=5ms"), startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=5ms")
	a, b := client(t, da.socket), client(t, db2.socket)
	ctx := context.Background()
	const key = "post:1"
	for _, op := range []string{"DEL", "SET"} {
		var done atomic.Bool
		var nb atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			for !done.Load() {
				if err := b.Incr(ctx, key).Err(); err != nil {
					t.Error(err)
					return
				}
				nb.Add(1)
			}
		})
		incrN(t, a, key, 50)
		base := int64(0)
		if op == "DEL" {
			if err := a.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			base = 500
			if err := a.Set(ctx, key, base, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		flush(t, da.socket)
		afterFlush := nb.Load()
		incrN(t, a, key, 20)
		for nb.Load() < afterFlush+50 {
			incrN(t, a, key+":other", 1) // let B run on
		}
		done.Store(true)
		wg.Wait()
		flush(t, db2.socket)
		flush(t, da.socket)
		got, all := getInt(t, a, key), nb.Load()
		// One increment of B may have been in flight when afterFlush was read.
		lo, hi := base+20+all-afterFlush-1, base+20+all
		if got < lo || got > hi {
			t.Fatalf("%s under concurrent increments: got %d; want within [%d, %d]", op, got, lo, hi)
		}
		if got := total(t, db, key); got < lo || got > hi {
			t.Fatalf("%s: counter_totals: got %d; want within [%d, %d]", op, got, lo, hi)
		}
		if _, err := a.Del(ctx, key).Result(); err != nil { // for the next op
			t.Fatal(err)
		}
		flush(t, da.socket)
	}
}

// kill -9 between a SET's acknowledgement and its round's commit: the
// replayed round writes it, ordered with the increments around it, so the
// value is the SET plus this daemon's increments after it; what another
// daemon committed before the replay is replaced, since the reference
// moment is when the SET's round commits.
func TestKill9BetweenSetAndCommit(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h", "COUNTERD_FSYNC=always")
	other := startDaemon(t, db)
	c := client(t, d.socket)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.IncrBy(ctx, "k", 5).Err())
	must(c.IncrBy(ctx, "gone", 5).Err())
	flush(t, d.socket)
	must(c.IncrBy(ctx, "k", 7).Err())
	must(c.Set(ctx, "k", 100, 0).Err())
	must(c.IncrBy(ctx, "k", 3).Err())
	must(c.Del(ctx, "gone").Err())
	must(c.IncrBy(ctx, "gone", 2).Err())
	d.kill()
	if got := total(t, db, "k"); got != 5 {
		t.Fatalf("before the replay: got %d; want 5 (the SET's round never committed)", got)
	}
	oc := client(t, other.socket)
	must(oc.IncrBy(ctx, "k", 1000).Err())
	flush(t, other.socket)
	d.restart()
	flush(t, d.socket)
	if got := total(t, db, "k"); got != 103 {
		t.Fatalf("after the replay: got %d; want 103 (SET 100 then +3)", got)
	}
	if got := total(t, db, "gone"); got != 2 {
		t.Fatalf("DEL then +2 after the replay: got %d; want 2", got)
	}
}

// SET's options, its refusals, and DEL/SET inside MULTI.
func TestSetCommands(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	c := client(t, d.socket)
	ctx := context.Background()
	if err := c.Set(ctx, "s", 41, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n := c.Incr(ctx, "s").Val(); n != 1 {
		t.Fatalf("INCR replies the amount added: got %d", n)
	}
	if got := getInt(t, c, "s"); got != 42 {
		t.Fatalf("SET 41, INCR: got %d; want 42", got)
	}
	for _, args := range [][]any{{"SET", "s", "x"}, {"SET", "s", "1", "NX"}, {"SET", "s", "1", "KEEPTTL"}, {"SET", "s", "1", "EX", "0"}, {"EXPIRE", "s", "1", "NX"}} {
		if err := c.Do(ctx, args...).Err(); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if err := c.Do(ctx, "SET", "s", "5", "EX", "100").Err(); err != nil {
		t.Fatal(err)
	}
	if ttl := c.TTL(ctx, "s").Val(); ttl.Seconds() < 99 || ttl.Seconds() > 100 {
		t.Fatalf("TTL after SET EX 100: got %v", ttl)
	}
	if ok := c.Persist(ctx, "s").Val(); !ok {
		t.Fatal("PERSIST: got false; want true")
	}
	if n := c.Do(ctx, "TTL", "s").Val(); n != int64(-1) {
		t.Fatalf("TTL after PERSIST: got %v; want -1", n)
	}
	if n := c.Do(ctx, "TTL", "nothing").Val(); n != int64(-2) {
		t.Fatalf("TTL of a key never counted: got %v; want -2", n)
	}
	if ok := c.Expire(ctx, "nothing", 100e9).Val(); ok {
		t.Fatal("EXPIRE of a key never counted: got true; want false")
	}
	// MULTI: reads see the transaction's changes before them.
	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "s")
		p.Del(ctx, "s", "nothing")
		p.Get(ctx, "s")
		p.IncrBy(ctx, "s", 4)
		p.Set(ctx, "s", 10, 0)
		p.IncrBy(ctx, "s", 2)
		p.Get(ctx, "s")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"5", "1", "0", "4", "OK", "2", "12"}
	for i, cmd := range cmds {
		var got string
		switch v := cmd.(type) {
		case *redis.StringCmd:
			got = v.Val()
		case *redis.IntCmd:
			got = itoa(v.Val())
		case *redis.StatusCmd:
			got = v.Val()
		}
		if got != want[i] {
			t.Errorf("MULTI reply %d (%v): got %q; want %q", i, cmd.Args(), got, want[i])
		}
	}
	flush(t, d.socket)
	if got := total(t, db, "s"); got != 12 {
		t.Fatalf("after MULTI: got %d; want 12", got)
	}
}

func unixTime(sec int64) time.Time { return time.Unix(sec, 0) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
