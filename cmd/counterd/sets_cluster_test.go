package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/counterd/counterd/internal/cluster"
)

// Exact sets on a PL/Proxy cluster of 4 partitions: SADD/SREM reply what
// their round decided, SISMEMBER, SMISMEMBER and SCARD read each set on
// its key's partition, and through the proxy counter_set_members_of,
// counter_set_contains and counter_totals answer as one database would.
// Each set's member rows are on its key's partition and nowhere else.
func TestSetsOnCluster(t *testing.T) {
	t.Parallel()
	const n = 4
	c, d := startCluster(t, n)
	rc := client(t, d.socket)
	ctx := context.Background()

	// Keys on every partition, each with a set of its own size.
	var keys []string
	onPart := make([]int, n)
	for i := 0; len(keys) < 12 && i < 1000; i++ {
		k := fmt.Sprintf("post:%d:likes", i)
		if p := cluster.Partition(k, n); onPart[p] < 3 {
			onPart[p]++
			keys = append(keys, k)
		}
	}
	if len(keys) != 12 {
		t.Fatalf("found %d keys, 3 on each of %d partitions; want 12", len(keys), n)
	}
	member := func(j int) string { return "user:" + strconv.Itoa(j) }
	want := map[string][]string{} // each key's members, sorted as bytes
	for i, k := range keys {
		size := i%5 + 3 // user:0, user:2 and more stay members
		args := []any{"SADD", k}
		for j := range size {
			args = append(args, member(j))
		}
		if got := reply(t, rc, args...); got != strconv.Itoa(size) {
			t.Fatalf("SADD %s of %d members: %s", k, size, got)
		}
		if got := reply(t, rc, "SADD", k, member(0)); got != "0" {
			t.Fatalf("SADD %s %s again: %s; want 0", k, member(0), got)
		}
		if got := reply(t, rc, "SREM", k, member(1), "nobody"); got != "1" {
			t.Fatalf("SREM %s %s nobody: %s; want 1", k, member(1), got)
		}
		for j := range size {
			if j != 1 {
				want[k] = append(want[k], member(j))
			}
		}
		slices.Sort(want[k])
	}

	// The daemon's reads.
	for _, k := range keys {
		if got := reply(t, rc, "SCARD", k); got != strconv.Itoa(len(want[k])) {
			t.Errorf("SCARD %s: %s; want %d", k, got, len(want[k]))
		}
		if got := reply(t, rc, "SMISMEMBER", k, member(0), member(1), member(2), "nobody"); got != "[1 0 1 0]" {
			t.Errorf("SMISMEMBER %s user:0 user:1 user:2 nobody: %s; want [1 0 1 0]", k, got)
		}
		last := want[k][len(want[k])-1]
		if got := reply(t, rc, "SISMEMBER", k, last); got != "1" {
			t.Errorf("SISMEMBER %s %s: %s; want 1", k, last, got)
		}
	}

	// The proxy's functions.
	proxy := c.Proxy.Pool
	for _, k := range keys {
		rows, err := proxy.Query(ctx, `SELECT member FROM counter_set_members_of($1, 100)`, k)
		if err != nil {
			t.Fatalf("counter_set_members_of(%s) through the proxy: %v", k, err)
		}
		var got []string
		for rows.Next() {
			var m []byte
			if err := rows.Scan(&m); err != nil {
				t.Fatal(err)
			}
			got = append(got, string(m))
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("counter_set_members_of(%s) through the proxy: %v", k, err)
		}
		if !slices.Equal(got, want[k]) {
			t.Errorf("counter_set_members_of(%s) through the proxy: %q; want %q", k, got, want[k])
		}
		// The cursor: the members after the first.
		var after int
		if err := proxy.QueryRow(ctx, `SELECT count(*) FROM counter_set_members_of($1, 100, $2::bytea)`, k, []byte(want[k][0])).Scan(&after); err != nil || after != len(want[k])-1 {
			t.Errorf("counter_set_members_of(%s, 100, %s) through the proxy: %d members, %v; want %d", k, want[k][0], after, err, len(want[k])-1)
		}
		for m, is := range map[string]bool{member(0): true, member(1): false, "nobody": false} {
			var got bool
			if err := proxy.QueryRow(ctx, `SELECT counter_set_contains($1, $2::bytea)`, k, []byte(m)).Scan(&got); err != nil || got != is {
				t.Errorf("counter_set_contains(%s, %s) through the proxy: %v, %v; want %v", k, m, got, err, is)
			}
		}
	}
	rows, err := proxy.Query(ctx, `SELECT key, total FROM counter_totals($1)`, keys)
	if err != nil {
		t.Fatalf("counter_totals(keys) through the proxy: %v", err)
	}
	totals := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		totals[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("counter_totals(keys) through the proxy: %v", err)
	}
	for _, k := range keys {
		if totals[k] != int64(len(want[k])) {
			t.Errorf("counter_totals(%s) through the proxy: %d; want %d", k, totals[k], len(want[k]))
		}
	}

	// Each set's rows are on its key's partition alone.
	for p := range n {
		got := map[string]int{}
		rows, err := c.Parts[p].Pool.Query(ctx, `SELECT key, count(*) FROM counter_set_members WHERE added_at IS NOT NULL GROUP BY key`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			var m int
			if err := rows.Scan(&k, &m); err != nil {
				t.Fatal(err)
			}
			got[k] = m
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			mine := cluster.Partition(k, n) == p
			switch {
			case mine && got[k] != len(want[k]):
				t.Errorf("partition %d has %d members of %s; want %d", p, got[k], k, len(want[k]))
			case !mine && got[k] != 0:
				t.Errorf("partition %d has %d members of %s; it is partition %d's", p, got[k], k, cluster.Partition(k, n))
			}
		}
	}
}
