package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

// go-redis's TxPipelined (MULTI ... EXEC) is applied once, with each
// command's reply in order, and a transaction with a bad command applies
// nothing. Before, MULTI and EXEC were unknown commands: the pipeline
// failed while its increments landed, so a retry counted them twice.
func TestTransactionGoRedis(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h") // only FLUSH writes
	c := client(t, d.socket)
	ctx := context.Background()

	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "tx:a")
		p.Incr(ctx, "tx:a")
		p.IncrBy(ctx, "tx:a", 5)
		p.IncrBy(ctx, "tx:b", -2)
		p.Get(ctx, "tx:a")
		return nil
	})
	if err != nil {
		t.Fatalf("TxPipelined: %v", err)
	}
	var got []string
	for _, cmd := range cmds {
		switch cmd := cmd.(type) {
		case *redis.IntCmd:
			got = append(got, fmt.Sprint(cmd.Val()))
		case *redis.StringCmd:
			got = append(got, cmd.Val())
		default:
			t.Fatalf("unexpected %T", cmd)
		}
	}
	if want := "[0 1 5 -2 6]"; fmt.Sprint(got) != want {
		t.Fatalf("replies: got %v; want %s", got, want)
	}

	// A bad command discards the whole transaction.
	var bad *redis.Cmd
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "tx:a")
		bad = p.Do(ctx, "frobnicate", "x")
		p.Incr(ctx, "tx:b")
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		t.Fatalf("transaction with an unknown command: got %v; want EXECABORT", err)
	}
	if err := bad.Err(); err == nil || !strings.Contains(err.Error(), "unknown command 'frobnicate'") {
		t.Fatalf("the unknown command: got %v; want its error", err)
	}
	if got := c.Do(ctx, "EXEC").Err(); got == nil || got.Error() != "ERR EXEC without MULTI" {
		t.Fatalf("EXEC after EXECABORT: got %v; want the transaction ended", got)
	}
	flush(t, d.socket)
	for key, want := range map[string]int64{"tx:a": 6, "tx:b": -2} {
		if got := total(t, db, key); got != want {
			t.Errorf("%s in PostgreSQL: got %d; want %d", key, got, want)
		}
	}
}

// A transaction is applied whole or not at all: with INCRBY k MaxInt64
// pending, a transaction of INCR other and INCR k overflows k and applies
// neither. Before, INCR other landed and INCR k failed.
func TestTransactionAllOrNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	c := client(t, d.socket)
	ctx := context.Background()
	if err := c.IncrBy(ctx, "k", math.MaxInt64).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "other")
		p.Incr(ctx, "k")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "nothing applied") || !strings.Contains(err.Error(), "overflow") {
		t.Fatalf("overflowing transaction: got %v; want an error saying nothing was applied", err)
	}
	flush(t, d.socket)
	if got := total(t, db, "k"); got != math.MaxInt64 {
		t.Errorf("k: got %d; want %d", got, int64(math.MaxInt64))
	}
	if got := total(t, db, "other"); got != 0 {
		t.Errorf("other: got %d; want 0 (the transaction applied nothing)", got)
	}
}

// A raw transactional pipeline, as redis-py's pipeline() sends it, in one
// write. Under COUNTERD_ACK=commit EXEC replies once the transaction is
// committed, so PostgreSQL has it without a FLUSH.
func TestTransactionRawPipeline(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_ACK=commit", "COUNTERD_FLUSH_INTERVAL=1h")
	conn := dialRaw(t, d.socket)
	if _, err := io.WriteString(conn, "MULTI\r\nINCR raw:a\r\nINCR raw:b\r\nEXEC\r\n"); err != nil {
		t.Fatal(err)
	}
	want := "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:1\r\n"
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != want {
		t.Fatalf("replies: got %q, %v; want %q", buf, err, want)
	}
	for _, key := range []string{"raw:a", "raw:b"} {
		if got := total(t, db, key); got != 1 {
			t.Errorf("%s in PostgreSQL once EXEC replied: got %d; want 1", key, got)
		}
	}
}
