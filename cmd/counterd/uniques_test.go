package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/hll"
	"github.com/counterd/counterd/internal/pgtest"
)

// memberNames returns "m<from>" through "m<to-1>".
func memberNames(from, to int) []any {
	out := make([]any, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("m%d", i))
	}
	return out
}

// pfaddAll adds members in PFADDs of 500.
func pfaddAll(t *testing.T, c *redis.Client, key string, members []any) {
	t.Helper()
	for i := 0; i < len(members); i += 500 {
		if err := c.PFAdd(context.Background(), key, members[i:min(i+500, len(members))]...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func pfcount(t *testing.T, c *redis.Client, keys ...string) int64 {
	t.Helper()
	n, err := c.PFCount(context.Background(), keys...).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sqlUniques is counter_uniques' estimate of key.
func sqlUniques(t *testing.T, db *pgtest.DB, key string) float64 {
	t.Helper()
	var n float64
	if err := db.Pool.QueryRow(context.Background(), `SELECT estimate FROM counter_uniques(ARRAY[$1])`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// PFADD's replies, and PFCOUNT reading its own writes before they are
// committed, exact below the explicit threshold and within the error
// above it; the members of one set added through two daemons count as the
// same members added through one; SQL's union is PFCOUNT's; PFMERGE.
func TestUniquesAcrossDaemons(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d1 := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h")
	d2 := startDaemon(t, db)
	c1, c2 := client(t, d1.socket), client(t, d2.socket)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(d1.log(), d2.log())
		}
	})
	checkPFAddReplies(t, c1, c2)

	// 6,000 members: 0-3,999 through d1 (pending), 2,000-5,999 through d2
	// (committed); "one" gets all 6,000 through d1.
	pfaddAll(t, c1, "u", memberNames(0, 4000))
	pfaddAll(t, c2, "u", memberNames(2000, 6000))
	pfaddAll(t, c1, "one", memberNames(0, 6000))
	flush(t, d2.socket)
	one, u := pfcount(t, c1, "one"), pfcount(t, c1, "u")
	if one != u {
		t.Fatalf("PFCOUNT of one stream %d, of the same members through two daemons %d; want equal", one, u)
	}
	if one < 6000*97/100 || one > 6000*103/100 {
		t.Fatalf("PFCOUNT of 6,000 members: got %d; want within 3%%", one)
	}
	if got := pfcount(t, c1, "u", "k"); got < u || got > u+8 {
		t.Fatalf("PFCOUNT u k: got %d; want about %d + 4", got, u)
	}
	flush(t, d1.socket)
	if got := pfcount(t, c2, "u"); got != u {
		t.Fatalf("PFCOUNT u through the other daemon once committed: got %d; want %d", got, u)
	}
	if !sqlTrue(t, db, `SELECT (SELECT sketch FROM counter_unique_sketch_text(ARRAY['u'])) =
		(SELECT sketch FROM counter_unique_sketch_text(ARRAY['one']))`) {
		t.Fatal("stored sketch of u differs from that of one")
	}
	if got := sqlUniques(t, db, "k"); got != 4 {
		t.Fatalf("counter_uniques of k: got %v; want 4", got)
	}
	// hll_union_agg in SQL over the stored sketches is PFCOUNT's union.
	if got, want := int64(sqlUnion(t, db, "u", "k").Estimate()), pfcount(t, c2, "u", "k"); got != want {
		t.Fatalf("estimate of hll_union_agg of u and k in SQL: %d; PFCOUNT u k: %d", got, want)
	}
	checkPFMerge(t, db, d2, c1, c2)
}

// checkPFAddReplies checks PFADD's replies on c1 and PFCOUNT reading
// c1's pending members, which c2's daemon does not see.
func checkPFAddReplies(t *testing.T, c1, c2 *redis.Client) {
	t.Helper()
	ctx := context.Background()
	for _, step := range []struct {
		members []any
		want    int64
	}{{[]any{"a", "b", "c"}, 1}, {[]any{"a"}, 0}, {[]any{"c", "b"}, 0}, {[]any{"d"}, 1}, {nil, 0}} {
		if got := c1.PFAdd(ctx, "k", step.members...).Val(); got != step.want {
			t.Fatalf("PFADD k %v: got %d; want %d", step.members, got, step.want)
		}
	}
	if got := c1.PFAdd(ctx, "empty").Val(); got != 1 {
		t.Fatalf("PFADD of a new key without members: got %d; want 1", got)
	}
	if got := pfcount(t, c1, "k"); got != 4 {
		t.Fatalf("PFCOUNT k, pending: got %d; want 4", got)
	}
	if got := pfcount(t, c2, "k"); got != 0 {
		t.Fatalf("PFCOUNT k through the other daemon before a flush: got %d; want 0", got)
	}
	if got := pfcount(t, c1, "nothing", "empty"); got != 0 {
		t.Fatalf("PFCOUNT of keys without members: got %d; want 0", got)
	}
}

// checkPFMerge merges through c2 (daemon d2) into a key with members of
// its own; the stored result is hll_union of the stored sketches.
func checkPFMerge(t *testing.T, db *pgtest.DB, d2 *daemon, c1, c2 *redis.Client) {
	t.Helper()
	ctx := context.Background()
	pfaddAll(t, c2, "dest", memberNames(10_000, 10_010))
	if err := c2.PFMerge(ctx, "dest", "u", "k").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c2.PFMerge(ctx, "small", "k").Err(); err != nil {
		t.Fatal(err)
	}
	if got := pfcount(t, c2, "small"); got != 4 {
		t.Fatalf("PFCOUNT of a merge of 4 members: got %d; want 4", got)
	}
	merged := pfcount(t, c2, "dest")
	if want := pfcount(t, c2, "u", "k", "dest"); merged != want {
		t.Fatalf("PFCOUNT dest after PFMERGE dest u k: got %d; want PFCOUNT u k dest, %d", merged, want)
	}
	flush(t, d2.socket)
	if !sqlTrue(t, db, `SELECT (SELECT sketch FROM counter_unique_sketch_text(ARRAY['dest'])) =
		(SELECT public.hll_union_agg(sketch::public.hll)::text FROM counter_unique_sketch_text(ARRAY['u', 'k', 'dest']))`) {
		t.Fatal("stored sketch of dest after PFMERGE differs from hll_union_agg of u, k and dest")
	}
	if got := pfcount(t, c1, "dest"); got != merged {
		t.Fatalf("PFCOUNT dest through the first daemon: got %d; want %d", got, merged)
	}
}

// sqlTrue runs query, which returns one boolean.
func sqlTrue(t *testing.T, db *pgtest.DB, query string) bool {
	t.Helper()
	var ok bool
	if err := db.Pool.QueryRow(context.Background(), query).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// sqlUnion is hll_union_agg, in SQL, of the stored sketches of keys.
func sqlUnion(t *testing.T, db *pgtest.DB, keys ...string) *hll.Sketch {
	t.Helper()
	var text string
	if err := db.Pool.QueryRow(context.Background(), `SELECT public.hll_union_agg(sketch::public.hll)::text
		FROM counter_unique_sketch_text($1)`, keys).Scan(&text); err != nil {
		t.Fatal(err)
	}
	return parseSketchText(t, text)
}

// parseSketchText parses hll's text form of a sketch.
func parseSketchText(t *testing.T, text string) *hll.Sketch {
	t.Helper()
	raw, err := hex.DecodeString(strings.TrimPrefix(text, `\x`))
	if err != nil {
		t.Fatal(err)
	}
	sk, err := hll.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

// kill -9 after acknowledged PFADDs whose round never committed: the
// restarted daemon replays them, and the count is what was acknowledged.
func TestUniquesKill9(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=1h", "COUNTERD_FSYNC=always")
	c := client(t, d.socket)
	pfaddAll(t, c, "small", memberNames(0, 700))
	pfaddAll(t, c, "big", memberNames(0, 3000))
	// PFADD key member, one member a call, pipelined (the fast path).
	pipe := c.Pipeline()
	for _, m := range memberNames(0, 300) {
		pipe.PFAdd(context.Background(), "one", m)
	}
	cmds, err := pipe.Exec(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if n, err := cmd.(*redis.IntCmd).Result(); err != nil || n != 1 {
			t.Fatalf("pipelined PFADD %d: got %d, %v; want 1", i, n, err)
		}
	}
	// The same members again: known, confirmed (fsynced) members are
	// answered 0 and not journaled again; the first PFADDs' records still
	// carry them through the kill.
	for _, m := range memberNames(0, 300) {
		pipe.PFAdd(context.Background(), "one", m)
	}
	if cmds, err = pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if n, err := cmd.(*redis.IntCmd).Result(); err != nil || n != 0 {
			t.Fatalf("repeated pipelined PFADD %d: got %d, %v; want 0", i, n, err)
		}
	}
	if known := metric(t, d, "counterd_uniques_known_total"); known != 300 {
		t.Errorf("counterd_uniques_known_total after 300 repeated members: %v; want 300", known)
	}
	small, big := pfcount(t, c, "small"), pfcount(t, c, "big")
	if small != 700 {
		t.Fatalf("PFCOUNT small: got %d; want 700", small)
	}
	d.kill()
	if got := sqlUniques(t, db, "small"); got != 0 {
		t.Fatalf("before the replay: counter_uniques of small is %v; want 0 (its round never committed)", got)
	}
	d.restart()
	c = client(t, d.socket)
	if got := pfcount(t, c, "small"); got != small {
		t.Fatalf("PFCOUNT small after kill -9 and restart: got %d; want %d", got, small)
	}
	flush(t, d.socket)
	if got, gotBig := pfcount(t, c, "small"), pfcount(t, c, "big"); got != small || gotBig != big {
		t.Fatalf("PFCOUNT after the replay committed: got %d, %d; want %d, %d", got, gotBig, small, big)
	}
	if got := pfcount(t, c, "one"); got != 300 {
		t.Fatalf("PFCOUNT of 300 pipelined single PFADDs after the replay: got %d; want 300", got)
	}
	if got := sqlUniques(t, db, "small"); got != 700 {
		t.Fatalf("counter_uniques of small after the replay: got %v; want 700", got)
	}
}
