package peer_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/bench/internal/peer"
	"github.com/counterd/counterd/bench/internal/process"
	"github.com/counterd/counterd/internal/pgtest"
)

// startRedis starts a redis-server keeping nothing on a Unix socket in a
// temporary directory, stopped when the test ends; it skips the test when
// redis-server is not installed.
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	dir := t.TempDir()
	socket := filepath.Join(dir, "r.sock")
	proc, err := process.Start(context.Background(), process.Spec{
		Name: "redis-server", Path: path, Dir: dir, Timeout: time.Minute,
		Args:  []string{"--port", "0", "--unixsocket", socket, "--dir", dir, "--save", "", "--appendonly", "no"},
		Ready: func(line string) bool { return strings.Contains(strings.ToLower(line), "ready to accept connections") },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Stop(30 * time.Second) })
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: socket, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestMoveRealServers moves HINCRBYs from a real redis-server into real
// PostgreSQL, then makes the upsert fail (the table is gone): the renamed
// hash stays in redis-server and the next move, once the table is back,
// stores every increment exactly once.
func TestMoveRealServers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc := startRedis(t)
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	m := &peer.Mover{Buffer: peer.RedisBuffer{C: rc}, Store: peer.PGStore{Conn: conn}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	incr := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			if err := rc.HIncrBy(ctx, peer.Hash, k, 1).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	total := func(want int64) {
		t.Helper()
		got, err := peer.Total(ctx, db.Pool)
		if err != nil || got != want {
			t.Fatalf("total %d (%v); want %d", got, err, want)
		}
	}

	must(peer.CreateTable(ctx, db.Pool))
	incr("a", "b", "a")
	must(m.Move(ctx))
	total(3)
	must(m.Move(ctx)) // nothing to move
	total(3)

	_, err = db.Pool.Exec(ctx, `ALTER TABLE `+peer.Table+` RENAME TO away`)
	must(err)
	incr("a", "c")
	if err := m.Move(ctx); err == nil {
		t.Fatal("Move without its table: nil error; want the upsert's")
	}
	if n, err := rc.HLen(ctx, peer.Moving).Result(); err != nil || n != 2 {
		t.Fatalf("%s has %d fields (%v) after the failed move; want 2", peer.Moving, n, err)
	}
	incr("d")
	_, err = db.Pool.Exec(ctx, `ALTER TABLE away RENAME TO `+peer.Table)
	must(err)
	must(m.Move(ctx))
	total(6)
	var a int64
	if err := db.Pool.QueryRow(ctx, `SELECT total FROM `+peer.Table+` WHERE key = 'a'`).Scan(&a); err != nil || a != 3 {
		t.Errorf("a = %d (%v); want 3", a, err)
	}
	if n, err := rc.Exists(ctx, peer.Hash, peer.Moving).Result(); err != nil || n != 0 {
		t.Errorf("%d buffer keys left (%v); want none", n, err)
	}
	if m.Stats != (peer.Stats{Moves: 3, Rows: 5, Increments: 6}) {
		t.Errorf("stats %+v; want 3 moves, 5 rows, 6 increments", m.Stats)
	}
}
