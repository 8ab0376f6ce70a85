package slots

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
)

// BenchmarkWriteStatement writes rounds of distinct keys through one
// connection, 90% of them keys that already have a slot row and 10% new
// ones, and reports the PostgreSQL backend's CPU time per slot row
// (pg-µs/row, from /proc, so only when the server runs on this machine)
// and rows written per second. It runs the round statement of a round of
// totals, and candidates kept only here for comparison:
// writeBatchByCTID, and the round statement reading its keys from a
// staging table filled by COPY in the same transaction (a temporary
// table, an unlogged one and a logged one) instead of from array
// parameters.
//
//	go test ./internal/slots/ -run '^$' -bench WriteStatement -benchtime 40x -count 5
func BenchmarkWriteStatement(b *testing.B) {
	ws := testWriters(b)
	current := ws.statement(1<<(ws.byKind[change.Total]-1), false)
	for _, size := range []int{2000, 10000} {
		for _, c := range []struct {
			name  string
			write roundWrite
		}{
			{"current", writeByArrays(current)},
			{"ctid", writeByArrays(writeBatchByCTID)},
			{"copy-temp", writeByCopy(current, "CREATE TEMPORARY TABLE round_stage (LIKE round_stage_shape) ON COMMIT DELETE ROWS")},
			{"copy-unlogged", writeByCopy(current, "CREATE UNLOGGED TABLE round_stage (LIKE round_stage_shape)")},
			{"copy-logged", writeByCopy(current, "CREATE TABLE round_stage (LIKE round_stage_shape)")},
		} {
			b.Run(fmt.Sprintf("keys=%d/stmt=%s", size, c.name), func(b *testing.B) {
				benchWriteStatement(b, c.write, size)
			})
		}
	}
}

// roundWrite writes one round of sorted keys with identity seq and
// reports the rows it updated and inserted. setup prepares the
// connection once, before the first round.
type roundWrite struct {
	setup func(ctx context.Context, conn *pgxpool.Conn) error
	write func(ctx context.Context, conn *pgxpool.Conn, seq int64, keys []string, deltas []int64, vars []float64, fallback, lanes []int16) (updated, inserted int, err error)
}

// benchHome is the home slot the benchmark's rounds start from.
const benchHome int16 = 0

// writeByArrays runs query, a round statement, with the round as array
// parameters: what the daemon does.
func writeByArrays(query string) roundWrite {
	// The daemon's statement takes the home slot after the arrays; the
	// variants written for comparison may not.
	homed := strings.Contains(query, "$8::smallint")
	return roundWrite{write: func(ctx context.Context, conn *pgxpool.Conn, seq int64, keys []string, deltas []int64, vars []float64, fallback, lanes []int16) (updated, inserted int, err error) {
		var done int
		args := []any{pgx.QueryExecModeCacheDescribe, []string{"bench/0"}, seq, keys, deltas, vars, fallback, lanes}
		if homed {
			args = append(args, benchHome)
		}
		var held bool // whether an expiry held the round back: none here
		err = conn.QueryRow(ctx, query, args...).Scan(&updated, &inserted, &done, &held)
		return updated, inserted, err
	}}
}

// stagedFrom is where the round statement reads a staged round: the
// staging table in key order, in place of its array parameters.
const stagedFrom = `(SELECT key, n, v, fallback, lane FROM round_stage ORDER BY key)`

// writeByCopy copies the round into a staging table made by create, in
// the transaction that then runs query with the staging table in place
// of its array parameters, and empties the table (a temporary table ON
// COMMIT DELETE ROWS empties itself).
func writeByCopy(query, create string) roundWrite {
	arrays := "unnest($3::text[], $4::bigint[], $5::float8[], $6::smallint[], $7::smallint[])\n        AS b(key, n, v, fallback, lane)"
	if !strings.Contains(query, arrays) {
		panic("the round statement no longer reads its keys from " + arrays)
	}
	staged := strings.Replace(query, arrays, stagedFrom+" AS b", 1)
	// The home slot is the one parameter left after the arrays; a
	// literal here, so the staged statement's parameters stay $1 and $2.
	if !strings.Contains(staged, "$8::smallint") {
		panic("the round statement no longer takes its home slot as $8")
	}
	staged = strings.ReplaceAll(staged, "$8::smallint", fmt.Sprintf("%d::smallint", benchHome))
	temp := strings.Contains(create, "TEMPORARY")
	return roundWrite{
		setup: func(ctx context.Context, conn *pgxpool.Conn) error {
			_, err := conn.Exec(ctx, `CREATE TABLE round_stage_shape (key text, n bigint, v float8, fallback smallint, lane smallint);`+create)
			return err
		},
		write: func(ctx context.Context, conn *pgxpool.Conn, seq int64, keys []string, deltas []int64, vars []float64, fallback, lanes []int16) (updated, inserted int, err error) {
			tx, err := conn.Begin(ctx)
			if err != nil {
				return 0, 0, err
			}
			defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
			_, err = tx.CopyFrom(ctx, pgx.Identifier{"round_stage"}, []string{"key", "n", "v", "fallback", "lane"},
				pgx.CopyFromSlice(len(keys), func(i int) ([]any, error) {
					return []any{keys[i], deltas[i], vars[i], fallback[i], lanes[i]}, nil
				}))
			if err != nil {
				return 0, 0, err
			}
			var done int
			var held bool
			if err := tx.QueryRow(ctx, staged, []string{"bench/0"}, seq).Scan(&updated, &inserted, &done, &held); err != nil {
				return 0, 0, err
			}
			if !temp {
				if _, err := tx.Exec(ctx, `DELETE FROM round_stage`); err != nil {
					return 0, 0, err
				}
			}
			return updated, inserted, tx.Commit(ctx)
		},
	}
}

func benchWriteStatement(b *testing.B, w roundWrite, size int) {
	// One connection, so every round runs on the backend whose CPU time
	// is read.
	db := pgtest.New(b, pgtest.Options{MaxConns: 1})
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	if w.setup != nil {
		if err := w.setup(ctx, conn); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var seq int64
	round := func(keys []string) (updated, inserted int) {
		b.Helper()
		slices.Sort(keys)
		n := len(keys)
		deltas, vars, fallback, lanes := make([]int64, n), make([]float64, n), make([]int16, n), make([]int16, n)
		for i := range keys {
			deltas[i], fallback[i], lanes[i] = 1, int16(rng.IntN(DefaultSlots)), 1
		}
		seq++
		updated, inserted, err := w.write(ctx, conn, seq, keys, deltas, vars, fallback, lanes)
		if err != nil {
			b.Fatal(err)
		}
		return updated, inserted
	}

	existing := make([]string, 2*size)
	for i := range existing {
		existing[i] = "post:" + strconv.Itoa(i)
	}
	round(slices.Clone(existing))
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE counter_slots`); err != nil {
		b.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	_, cpuOK := backendCPU(pid)

	newKeys := size / 10
	var rows, fresh int
	var ticks int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		keys := make([]string, 0, size)
		for range newKeys {
			fresh++
			keys = append(keys, "new:"+strconv.Itoa(fresh))
		}
		for _, i := range rng.Perm(len(existing))[:size-newKeys] {
			keys = append(keys, existing[i])
		}
		before, _ := backendCPU(pid)
		b.StartTimer()
		updated, inserted := round(keys)
		b.StopTimer()
		after, _ := backendCPU(pid)
		ticks += after - before
		if updated != size-newKeys || inserted != newKeys {
			b.Fatalf("updated %d, inserted %d; want %d, %d", updated, inserted, size-newKeys, newKeys)
		}
		rows += size
		b.StartTimer()
	}
	b.StopTimer()
	var again int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&again); err != nil || again != pid {
		b.Fatalf("backend changed from %d to %d (%v): its CPU time is not the rounds'", pid, again, err)
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	if cpuOK {
		b.ReportMetric(float64(ticks)*1e6/userHZ/float64(rows), "pg-µs/row")
	}
	b.ReportMetric(0, "ns/op")
}

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100
// on Linux whatever the kernel's tick rate.
const userHZ = 100

// backendCPU returns the user plus system CPU time of process pid in
// clock ticks, or false when it cannot be read (a server on another
// machine).
func backendCPU(pid int) (int64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(raw)
	// Fields after the parenthesized command name, which may hold spaces;
	// utime and stime are fields 14 and 15 of the whole line.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	return utime + stime, err1 == nil && err2 == nil
}

// writeBatchByCTID is a candidate for the round statement of totals, measured by
// BenchmarkWriteStatement and not adopted: it was no cheaper. picked
// locks, per key in order, the first free slot row (SKIP LOCKED) or else
// the random slot's row (waiting, as the round statement's upsert would); updated
// adds to those rows by ctid, found by one TID scan and a hash join, so
// the common case has no second index probe and no speculative-insert
// path; inserted upserts the rest: keys with neither row, and rows whose
// locked version is newer than the statement's snapshot (the TID scan
// cannot see it). What it saves (ExecCheckIndexConstraints, about a fifth
// of the backend's time under the round statement) goes on the TID fetches, the
// hash join, whole-row copies of picked for the UPDATE's recheck and the
// CTE's extra passes.
const writeBatchByCTID = advancedCTE + `, fresh AS (
    SELECT array_agg(l.name IN (SELECT instance FROM advanced) ORDER BY l.ord) AS lanes
    FROM unnest($1::text[]) WITH ORDINALITY AS l(name, ord)
), picked AS (
    SELECT b.i, b.key, b.n, b.v, coalesce(f.slot, h.slot, b.fallback) AS slot, coalesce(f.ctid, h.ctid) AS row
    FROM unnest($3::text[], $4::bigint[], $5::float8[], $6::smallint[], $7::smallint[]) WITH ORDINALITY
        AS b(key, n, v, fallback, lane, i)
    LEFT JOIN LATERAL (
        SELECT s.slot, s.ctid FROM counter_slots s
        WHERE s.key = b.key
        ORDER BY s.slot
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS f ON true
    LEFT JOIN LATERAL (
        SELECT s.slot, s.ctid FROM counter_slots s
        WHERE f.slot IS NULL AND s.key = b.key AND s.slot = b.fallback
        FOR UPDATE
    ) AS h ON true
    WHERE $1::text[] IS NULL OR (SELECT lanes FROM fresh)[b.lane]
), updated AS (
    UPDATE counter_slots cs SET count = cs.count + p.n, variance = cs.variance + p.v
    FROM picked p
    WHERE cs.ctid = ANY (ARRAY(SELECT row FROM picked WHERE row IS NOT NULL)) AND cs.ctid = p.row
    RETURNING p.i
), inserted AS (
    INSERT INTO counter_slots AS cs (key, slot, count, variance)
    SELECT p.key, p.slot, p.n, p.v FROM picked p
    WHERE p.row IS NULL
       OR ((SELECT count(*) FROM updated) < (SELECT count(row) FROM picked)
           AND p.i NOT IN (SELECT i FROM updated))
    ON CONFLICT (key, slot) DO UPDATE
    SET count = cs.count + excluded.count, variance = cs.variance + excluded.variance
    RETURNING cs.xmax = 0 AS created
)
SELECT (SELECT count(*) FROM updated)::int + count(*) FILTER (WHERE NOT created)::int,
       count(*) FILTER (WHERE created)::int,
       (coalesce(cardinality($1::text[]), 0) - (SELECT count(*) FROM advanced))::int, false
FROM inserted`
