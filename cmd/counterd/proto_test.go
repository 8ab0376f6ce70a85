package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

// TestGoRedisProtocols connects go-redis with RESP3 (its default, which
// sends HELLO 3 and CLIENT SETINFO) and with RESP2, with and without a
// password, and checks the handshake and admin commands and INCR/GET.
func TestGoRedisProtocols(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	// No round is cut on a timer, so DBSIZE (keys pending) is not 0 by luck.
	open := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	locked := startDaemon(t, db, "COUNTERD_PASSWORD=s3cret", "COUNTERD_FLUSH_INTERVAL=1h")
	tests := []struct {
		name     string
		d        *daemon
		protocol int
		password string
	}{
		{"resp3", open, 3, ""},
		{"resp2", open, 2, ""},
		{"resp3 password", locked, 3, "s3cret"},
		{"resp2 password", locked, 2, "s3cret"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := redis.NewClient(&redis.Options{Network: "unix", Addr: tc.d.socket, Protocol: tc.protocol,
				Password: tc.password, ClientName: "e2e", PoolSize: 1})
			t.Cleanup(func() { c.Close() })

			info, err := c.Info(ctx).Result()
			if err != nil {
				t.Fatalf("INFO: %v", err)
			}
			for _, want := range []string{"redis_version:7.2.0\r\n", "server_name:counterd\r\n", "# Keyspace\r\ndb0:keys="} {
				if !strings.Contains(info, want) {
					t.Errorf("INFO lacks %q:\n%s", want, info)
				}
			}
			id, err := c.ClientID(ctx).Result()
			if err != nil || id < 1 {
				t.Fatalf("CLIENT ID: got %d, %v; want a positive id", id, err)
			}
			hello, err := c.Do(ctx, "HELLO").Result()
			if err != nil {
				t.Fatalf("HELLO: %v", err)
			}
			m, ok := hello.(map[any]any) // RESP3 map
			if tc.protocol == 2 {
				arr, _ := hello.([]any)
				m = map[any]any{}
				for i := 0; i+1 < len(arr); i += 2 {
					m[arr[i]] = arr[i+1]
				}
				ok = len(arr) == 14
			}
			if !ok || m["version"] != "7.2.0" || m["proto"] != int64(tc.protocol) || m["id"] != id {
				t.Errorf("HELLO: got %#v; want version 7.2.0, proto %d, id %d", hello, tc.protocol, id)
			}
			if name, err := c.ClientGetName(ctx).Result(); err != nil || name != "e2e" {
				t.Errorf("CLIENT GETNAME: got %q, %v; want e2e", name, err)
			}
			line, err := c.ClientInfo(ctx).Result()
			if err != nil || line.ID != id || line.Name != "e2e" || line.LibName == "" {
				t.Errorf("CLIENT INFO: got %+v, %v; want id %d, name e2e and go-redis's lib-name", line, err, id)
			}
			key := "proto:" + strings.ReplaceAll(tc.name, " ", "-")
			if n, err := c.Incr(ctx, key).Result(); err != nil || n != 1 {
				t.Fatalf("INCR: got %d, %v; want 1", n, err)
			}
			if n, err := c.IncrBy(ctx, key, 4).Result(); err != nil || n != 4 {
				t.Fatalf("INCRBY: got %d, %v; want 4", n, err)
			}
			if got, err := c.Get(ctx, key).Int64(); err != nil || got != 5 {
				t.Fatalf("GET: got %d, %v; want 5", got, err)
			}
			if n, err := c.DBSize(ctx).Result(); err != nil || n < 1 {
				t.Errorf("DBSIZE: got %d, %v; want at least 1", n, err)
			}
			if _, err := c.Command(ctx).Result(); err != nil {
				t.Errorf("COMMAND: %v", err)
			}
			if _, err := c.Time(ctx).Result(); err != nil {
				t.Errorf("TIME: %v", err)
			}
		})
	}

	// Without the password, everything but AUTH, HELLO and QUIT is refused.
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: locked.socket, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	if err := c.Incr(context.Background(), "k").Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("INCR without the password: got %v; want NOAUTH", err)
	}
}
