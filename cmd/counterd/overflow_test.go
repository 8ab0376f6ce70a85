package main

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

// A total beyond int64 is an error for that key only: MGET answers the
// other keys and gives the overflowing one an error element, and DEL
// zeroes it (counting it, since it is not 0). Before, both failed whole.
func TestOverflowingKeyFailsOnlyItself(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	c := client(t, d.socket)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// MaxInt64 committed, then 1 more: the stored total passes int64.
	for _, step := range [][]any{{"INCRBY", "ov", math.MaxInt64}, {"FLUSH"}, {"INCR", "ov"}, {"INCRBY", "fine", 3}, {"FLUSH"}} {
		if err := c.Do(ctx, step...).Err(); err != nil {
			t.Fatalf("%v: %v", step, err)
		}
	}
	got, err := c.Do(ctx, "MGET", "fine", "ov").Slice()
	if err != nil {
		t.Fatalf("MGET fine ov: %v; want an array", err)
	}
	if len(got) != 2 || got[0] != "3" {
		t.Fatalf("MGET fine ov: got %q; want [3, error]", got)
	}
	if e, ok := got[1].(error); !ok || !strings.Contains(e.Error(), `total of "ov" is 9223372036854775808`) ||
		!strings.Contains(e.Error(), "beyond int64") {
		t.Fatalf("MGET fine ov: element for ov is %#v; want the error naming ov's total beyond int64", got[1])
	}
	if err := c.Get(ctx, "ov").Err(); err == nil || !strings.Contains(err.Error(), "beyond int64") {
		t.Fatalf("GET ov: %v; want the error", err)
	}
	// In a transaction too, only ov's element is an error.
	conn := c.Conn()
	defer conn.Close()
	for _, cmd := range []string{"MULTI", "MGET"} {
		args := []any{cmd}
		if cmd == "MGET" {
			args = append(args, "fine", "ov")
		}
		if err := conn.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
	exec, err := conn.Do(ctx, "EXEC").Slice()
	if err != nil || len(exec) != 1 {
		t.Fatalf("EXEC: %q, %v; want one reply", exec, err)
	}
	if mget, ok := exec[0].([]any); !ok || len(mget) != 2 || mget[0] != "3" {
		t.Fatalf("EXEC's MGET fine ov: got %#v; want [3, error]", exec[0])
	} else if _, ok := mget[1].(error); !ok {
		t.Fatalf("EXEC's MGET fine ov: element for ov is %#v; want an error", mget[1])
	}
	if n, err := c.Del(ctx, "ov", "never").Result(); err != nil || n != 1 {
		t.Fatalf("DEL ov never: got %d, %v; want 1 (ov was not 0)", n, err)
	}
	if got, err := c.MGet(ctx, "fine", "ov").Result(); err != nil || len(got) != 2 || got[0] != "3" || got[1] != "0" {
		t.Fatalf("MGET fine ov after DEL ov: got %q, %v; want [3 0]", got, err)
	}
	if err := c.Do(ctx, "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}
	if got := total(t, db, "ov"); got != 0 {
		t.Fatalf("ov in PostgreSQL after DEL: got %d; want 0", got)
	}
}
