package slots

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/pgtest"
)

// BenchmarkSlotPick is what choosing a key's slot row costs PostgreSQL,
// by pick: the home-slot pick the round statement uses (kind_total.go:
// the first free row from the home slot up; else, unless the key has no
// row at or below the home, the first free row from 0; else the home row
// unless it exists; else a random other slot), the same pick asking
// "is there a home row" by a third probe (the first version of home
// slots), the pick homes replaced (the first free row from 0, else a
// random slot) and one measured and not taken (from the home slot up,
// then the home row unless it exists, and only then rows below the home:
// no fewer probes for a new key than the first, and every daemon whose
// home is above a key's rows would add a row of its own). Each round
// writes 10,000 keys, all of them new (the first write after a rollup
// pass folded a key's rows away, and most writes of keys written less
// often than the rollup runs) or all with a row in the home slot. It
// reports the backend's CPU per key (pg-µs/row, from /proc).
//
//	go test ./internal/slots/ -run '^$' -bench SlotPick -benchtime 20x -count 3
func BenchmarkSlotPick(b *testing.B) {
	for _, keys := range []string{"new", "existing"} {
		for _, p := range []struct{ name, slot, join string }{
			{"home", pickTopSlot, pickTopJoin},
			{"home-exists", pickHomeSlot, pickHomeJoin},
			{"from0", `coalesce(f.slot, b.fallback)`, pickFrom0Join},
			{"home-then-below", pickThenBelowSlot, pickFromHomeJoin},
		} {
			b.Run(fmt.Sprintf("keys=%s/pick=%s", keys, p.name), func(b *testing.B) {
				benchSlotPick(b, pickStatement(p.slot, p.join), keys == "new")
			})
		}
	}
}

// pickStatement is a round statement of totals reduced to its write:
// $1 keys, $2 deltas, $3 random other slots, $4 the home slot.
func pickStatement(slot, join string) string {
	return `WITH written AS (
    INSERT INTO counter_slots AS cs (key, slot, count, variance)
    SELECT b.key, ` + slot + `, b.n, 0
    FROM unnest($1::text[], $2::bigint[], $3::smallint[]) AS b(key, n, fallback)` + join + `
    ON CONFLICT (key, slot) DO UPDATE SET count = cs.count + excluded.count
    RETURNING cs.xmax = 0 AS created
)
SELECT count(*) FILTER (WHERE NOT created)::int, count(*) FILTER (WHERE created)::int FROM written`
}

const (
	pickFromHomeJoin = `
    LEFT JOIN LATERAL (
        SELECT s.slot FROM counter_slots s WHERE s.key = b.key AND s.slot >= $4::smallint
        ORDER BY s.slot LIMIT 1 FOR UPDATE SKIP LOCKED) AS f ON true`
	pickHomeJoin = pickFromHomeJoin + `
    LEFT JOIN LATERAL (
        SELECT s.slot FROM counter_slots s WHERE f.slot IS NULL AND s.key = b.key AND s.slot < $4::smallint
        ORDER BY s.slot LIMIT 1 FOR UPDATE SKIP LOCKED) AS g ON true`
	pickHomeSlot = `coalesce(f.slot, g.slot, CASE
        WHEN EXISTS (SELECT FROM counter_slots h WHERE h.key = b.key AND h.slot = $4::smallint)
        THEN b.fallback ELSE $4::smallint END)`
	pickFrom0Join = `
    LEFT JOIN LATERAL (
        SELECT s.slot FROM counter_slots s WHERE s.key = b.key
        ORDER BY s.slot LIMIT 1 FOR UPDATE SKIP LOCKED) AS f ON true`
	pickThenBelowSlot = `coalesce(f.slot, CASE
        WHEN NOT EXISTS (SELECT FROM counter_slots h WHERE h.key = b.key AND h.slot = $4::smallint) THEN $4::smallint
        ELSE coalesce((SELECT s.slot FROM counter_slots s WHERE s.key = b.key AND s.slot < $4::smallint
                       ORDER BY s.slot LIMIT 1 FOR UPDATE SKIP LOCKED), b.fallback) END)`
)

const (
	pickTopJoin = pickFromHomeJoin + `
    LEFT JOIN LATERAL (
        SELECT s.slot AS top FROM counter_slots s WHERE f.slot IS NULL AND s.key = b.key AND s.slot <= $4::smallint
        ORDER BY s.slot DESC LIMIT 1) AS e ON true`
	pickTopSlot = `coalesce(f.slot, CASE WHEN e.top IS NULL THEN $4::smallint ELSE coalesce(
        (SELECT s.slot FROM counter_slots s WHERE s.key = b.key AND s.slot < $4::smallint
         ORDER BY s.slot LIMIT 1 FOR UPDATE SKIP LOCKED),
        CASE WHEN e.top = $4::smallint THEN b.fallback ELSE $4::smallint END) END)`
)

// pickHome is the benchmark's home slot: one in the middle, so that the
// picks looking below it have slots to look at.
const pickHome int16 = 7

func benchSlotPick(b *testing.B, query string, fresh bool) {
	const size = 10000
	db := pgtest.New(b, pgtest.Options{MaxConns: 1})
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	rng := rand.New(rand.NewPCG(1, 2))
	round := func(keys []string) (updated, inserted int) {
		b.Helper()
		slices.Sort(keys)
		deltas, fallback := make([]int64, len(keys)), make([]int16, len(keys))
		for i := range keys {
			deltas[i], fallback[i] = 1, int16(rng.IntN(DefaultSlots))
		}
		args := []any{keys, deltas, fallback}
		if strings.Contains(query, "$4") { // the pick from 0 has no home
			args = append(args, pickHome)
		}
		if err := conn.QueryRow(ctx, query, args...).Scan(&updated, &inserted); err != nil {
			b.Fatal(err)
		}
		return updated, inserted
	}
	// Keys spread over the key space as a uniform load's are, so each
	// probe reads its own index pages.
	name := func(i int) string { return "post:" + strconv.Itoa(i*7919%1000003) }
	existing := make([]string, size)
	for i := range existing {
		existing[i] = name(i)
	}
	if !fresh {
		round(slices.Clone(existing))
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE counter_slots`); err != nil {
		b.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	_, cpuOK := backendCPU(pid)
	var ticks int64
	var rows, next int
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		keys := slices.Clone(existing)
		if fresh {
			for i := range keys {
				next++
				keys[i] = name(size + next)
			}
		}
		before, _ := backendCPU(pid)
		b.StartTimer()
		updated, inserted := round(keys)
		b.StopTimer()
		after, _ := backendCPU(pid)
		ticks += after - before
		if want := map[bool]int{true: size}[fresh]; inserted != want || updated+inserted != size {
			b.Fatalf("updated %d, inserted %d; want %d inserted of %d", updated, inserted, want, size)
		}
		rows += size
		b.StartTimer()
	}
	b.StopTimer()
	if cpuOK {
		b.ReportMetric(float64(ticks)*1e6/userHZ/float64(rows), "pg-µs/row")
	}
	b.ReportMetric(0, "ns/op")
}
