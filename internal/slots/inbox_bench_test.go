package slots_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// BenchmarkFleetInbox measures a prototype of "the rollup as the fleet's
// single coalescer" (issue 32) against today's write path, before anyone
// builds it. N writers (1 or 32 daemons) share a fleet's increments at
// inboxRate a second of simulated time (no sleeping: each round's content
// is drawn from the rate); by the fleet rule each writer cuts a round
// every N/10 s, so the fleet writes 10 rounds a second whatever N, each
// of inboxRate/10 increments drawn uniformly from the workload's keys.
// A simulated second's rounds of different writers run at once, each on
// its writer's own connection.
//
// path=slots writes each round with Store.ApplyOnce (one transaction,
// the round statement, the writer's own instance identity and home
// slot); the rollup's Fold of the slot rows, which today's path pays
// later, is measured once at the end and reported apart (fold-µs/incr).
// path=inbox appends each round as one row to an inbox table (keys and
// deltas as arrays, skipped when the folder's mark for the instance has
// reached its seq), and once every simulated second one folder folds the
// whole inbox into counters in one statement: DELETE ... RETURNING,
// unnest, GROUP BY key, one upsert per distinct key, and the instances'
// marks. Reads of inboxReadKeys keys run inboxReads times a simulated
// second, before the fold (the inbox at its fullest): Store.Totals for
// slots, counters plus the inbox rows holding any of the keys (a GIN
// index on keys) for inbox.
//
// Per increment: pg-µs/incr is the CPU time of every writer's and the
// folder's backends (from /proc, so only when the server runs on this
// machine); rows/incr the schema's pg_stat_user_tables inserts, updates
// and deletes; WAL-B/incr the WAL records that touch the schema's
// relations (pg_walinspect), or the server's whole WAL when that
// extension cannot be used. read-pg-µs and read-µs are one read's
// backend CPU and wall time. Each b.N is inboxSeconds simulated seconds.
//
//	go test ./internal/slots/ -run '^$' -bench FleetInbox -benchtime 3x
func BenchmarkFleetInbox(b *testing.B) {
	// One schema for every cell, each cell's keys and instances its own,
	// since a migration takes a second or more on a loaded machine.
	db := pgtest.New(b, pgtest.Options{MaxConns: 1})
	if _, err := db.Pool.Exec(context.Background(), inboxSchema); err != nil {
		b.Fatal(err)
	}
	wal := walMeter(b, db)
	var cell int
	for _, keys := range []int{1000, 100_000} {
		for _, n := range []int{1, 32} {
			for _, path := range []string{"slots", "inbox"} {
				b.Run(fmt.Sprintf("keys=%d/writers=%d/path=%s", keys, n, path), func(b *testing.B) {
					cell++
					benchFleetInbox(b, db, wal, fmt.Sprintf("c%d:", cell), keys, n, path == "inbox")
				})
			}
		}
	}
}

const (
	// inboxRate is the fleet's increments a second: about what the ×32
	// fleet bench reached on this machine (docs/performance.md, Fleet).
	inboxRate = 6000
	// inboxFleetRounds is COUNTERD_FLEET_ROUNDS: rounds a second over the
	// fleet, so a writer's round lasts writers/inboxFleetRounds seconds.
	inboxFleetRounds = 10
	// inboxSeconds is how many simulated seconds one b.N runs; one more
	// runs first, unmeasured, to create the rows.
	inboxSeconds = 1
	inboxReads   = 5
	// inboxReadKeys is one read's keys, drawn from the workload's.
	inboxReadKeys = 50
)

// inboxSchema is the inbox's tables: the rounds not yet folded; per
// instance, the last seq folded, so a retried round is appended once;
// and the totals they fold into (counters' shape, apart so that the two
// paths' cells can share a schema).
const inboxSchema = `
CREATE TABLE inbox (instance text, seq bigint, keys text[], deltas bigint[], PRIMARY KEY (instance, seq));
CREATE INDEX inbox_keys ON inbox USING gin (keys);
CREATE TABLE inbox_marks (instance text PRIMARY KEY, seq bigint NOT NULL);
CREATE TABLE inbox_totals (key text PRIMARY KEY, total numeric NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`

// inboxAppend is one writer's round.
const inboxAppend = `
INSERT INTO inbox (instance, seq, keys, deltas)
SELECT $1, $2, $3, $4
WHERE NOT EXISTS (SELECT FROM inbox_marks m WHERE m.instance = $1 AND m.seq >= $2)
ON CONFLICT DO NOTHING`

// inboxFold folds every inbox row its snapshot sees into the totals, once:
// the rows it deletes are the rows it adds.
const inboxFold = `
WITH folded AS (
    DELETE FROM inbox RETURNING instance, seq, keys, deltas
), marks AS (
    INSERT INTO inbox_marks AS m (instance, seq)
    SELECT instance, max(seq) FROM folded GROUP BY instance
    ON CONFLICT (instance) DO UPDATE SET seq = greatest(m.seq, excluded.seq)
)
INSERT INTO inbox_totals AS c (key, total)
SELECT u.key, sum(u.delta) FROM folded, unnest(folded.keys, folded.deltas) AS u(key, delta)
GROUP BY u.key
ORDER BY u.key
ON CONFLICT (key) DO UPDATE SET total = c.total + excluded.total, updated_at = now()`

// inboxRead is counter_totals for $1, from the inbox's totals with the
// unfolded rounds added.
const inboxRead = `
SELECT k.key, (coalesce(c.total, 0) + coalesce(i.n, 0))::bigint
FROM unnest($1::text[]) AS k(key)
LEFT JOIN inbox_totals c ON c.key = k.key
LEFT JOIN (
    SELECT u.key, sum(u.delta) AS n
    FROM inbox, unnest(inbox.keys, inbox.deltas) AS u(key, delta)
    WHERE inbox.keys && $1::text[] AND u.key = ANY ($1::text[])
    GROUP BY u.key
) AS i ON i.key = k.key`

// fleetConn is one backend: a pool of one connection and its pid.
type fleetConn struct {
	pool *pgxpool.Pool
	pid  int
}

func openFleetConn(b *testing.B, url string) *fleetConn {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	c := &fleetConn{pool: pool}
	if err := pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&c.pid); err != nil {
		b.Fatal(err)
	}
	return c
}

// cpu is the backend's CPU time in nanoseconds (false: not readable).
func (c *fleetConn) cpu() (int64, bool) { return procCPU(c.pid) }

// benchFleetInbox runs one cell in db; prefix names its keys and
// instances apart from other cells' (and from its own earlier runs).
func benchFleetInbox(b *testing.B, db *pgtest.DB, wal *walReader, prefix string, keyspace, writers int, inbox bool) {
	ctx := context.Background()
	prefix += strconv.Itoa(b.N) + ":"
	conns := make([]*fleetConn, writers)
	stores := make([]*slots.Store, writers)
	for i := range conns {
		conns[i] = openFleetConn(b, db.URL)
		var err error
		if stores[i], err = slots.New(conns[i].pool, slots.Options{Kinds: catalog.Writers(), Writers: 1, Home: i%slots.DefaultSlots + 1}); err != nil {
			b.Fatal(err)
		}
	}
	folder, reader := openFleetConn(b, db.URL), openFleetConn(b, db.URL)
	readStore, err := slots.New(reader.pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		b.Fatal(err)
	}
	// The backends that write: the writers and the folder.
	writing := append(slices.Clone(conns), folder)
	all := append(slices.Clone(writing), reader)

	rng := rand.New(rand.NewPCG(uint64(keyspace), uint64(writers)))
	perRound := inboxRate / inboxFleetRounds
	seqs := make([]int64, writers)
	var fleetRound, increments int64
	// second runs one simulated second: the fleet's rounds (each writer's
	// in order, writers at once), then reads, then the fold.
	second := func() (readCPU int64, readWall time.Duration) {
		b.Helper()
		byWriter := make([][][]change.Change, writers)
		for range inboxFleetRounds {
			w := int(fleetRound % int64(writers))
			fleetRound++
			byWriter[w] = append(byWriter[w], drawRound(rng, prefix, keyspace, perRound))
			increments += int64(perRound)
		}
		var g errgroup.Group
		for w, rounds := range byWriter {
			if len(rounds) == 0 {
				continue
			}
			g.Go(func() error {
				for _, round := range rounds {
					seqs[w]++
					if err := writeRound(ctx, conns[w], stores[w], prefix+strconv.Itoa(w), seqs[w], round, inbox); err != nil {
						return fmt.Errorf("writer %d round %d: %w", w, seqs[w], err)
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		for range inboxReads {
			keys := make([]string, inboxReadKeys)
			for i := range keys {
				keys[i] = inboxKey(prefix, rng.IntN(keyspace))
			}
			before, _ := reader.cpu()
			start := time.Now()
			if err := readKeys(ctx, reader, readStore, keys, inbox); err != nil {
				b.Fatal(err)
			}
			readWall += time.Since(start)
			after, _ := reader.cpu()
			readCPU += after - before
		}
		if inbox {
			if _, err := folder.pool.Exec(ctx, inboxFold); err != nil {
				b.Fatalf("fold: %v", err)
			}
		}
		return readCPU, readWall
	}

	second()
	_, cpuOK := folder.cpu()
	rows0 := schemaRows(b, db, all)
	wal.start(b, db)
	cpu0 := sumCPU(writing)
	inc0 := increments
	var readCPU int64
	var readWall time.Duration
	b.ResetTimer()
	for range b.N {
		for range inboxSeconds {
			t, w := second()
			readCPU += t
			readWall += w
		}
	}
	b.StopTimer()
	cpu := sumCPU(writing) - cpu0
	walBytes := wal.since(b, db)
	rows := schemaRows(b, db, all) - rows0
	measured := float64(increments - inc0)

	var foldCPU int64
	if !inbox {
		// What today's path pays later: the rollup folds the slot rows
		// of every round so far (the unmeasured second's too).
		before, _ := reader.cpu()
		if _, err := readStore.Fold(ctx, slots.FoldOptions{}); err != nil {
			b.Fatal(err)
		}
		after, _ := reader.cpu()
		foldCPU = after - before
	}
	for _, c := range all {
		var pid int
		if err := c.pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil || pid != c.pid {
			b.Fatalf("backend changed from %d to %d (%v): its CPU time is not the cell's", c.pid, pid, err)
		}
	}
	var stored int64
	totals := `SELECT coalesce(sum(total), 0)::bigint FROM counter_totals WHERE starts_with(key, $1)`
	if inbox {
		totals = `SELECT coalesce(sum(total), 0)::bigint FROM inbox_totals WHERE starts_with(key, $1)`
	}
	if err := db.Pool.QueryRow(ctx, totals, prefix).Scan(&stored); err != nil {
		b.Fatal(err)
	}
	if stored != increments {
		b.Fatalf("stored total %d; want %d", stored, increments)
	}

	reads := float64(b.N * inboxSeconds * inboxReads)
	if cpuOK {
		b.ReportMetric(float64(cpu)/1e3/measured, "pg-µs/incr")
		b.ReportMetric(float64(readCPU)/1e3/reads, "read-pg-µs")
		if !inbox {
			b.ReportMetric(float64(foldCPU)/1e3/float64(increments), "fold-µs/incr")
		}
	}
	b.ReportMetric(float64(rows)/measured, "rows/incr")
	b.ReportMetric(float64(walBytes)/measured, "WAL-B/incr")
	b.ReportMetric(float64(readWall.Microseconds())/reads, "read-µs")
	b.ReportMetric(0, "ns/op")
}

// drawRound is one writer's round: n increments of keys drawn uniformly,
// coalesced into one change per key.
func drawRound(rng *rand.Rand, prefix string, keyspace, n int) []change.Change {
	counts := make(map[int]int64, n)
	for range n {
		counts[rng.IntN(keyspace)]++
	}
	round := make([]change.Change, 0, len(counts))
	for k, d := range counts {
		round = append(round, change.Change{Kind: change.Total, Key: inboxKey(prefix, k), Delta: d})
	}
	slices.SortFunc(round, func(x, y change.Change) int { return strings.Compare(x.Key, y.Key) })
	return round
}

func inboxKey(prefix string, k int) string { return prefix + "post:" + strconv.Itoa(k) }

// writeRound writes instance's round seq: by the round statement or as
// one inbox row.
func writeRound(ctx context.Context, c *fleetConn, s *slots.Store, instance string, seq int64, round []change.Change, inbox bool) error {
	if !inbox {
		_, err := s.ApplyOnce(ctx, store.BatchID{Identity: store.Identity{Instance: instance}, Seq: uint64(seq)}, round)
		return err
	}
	keys, deltas := make([]string, len(round)), make([]int64, len(round))
	for i, ch := range round {
		keys[i], deltas[i] = ch.Key, ch.Delta
	}
	_, err := c.pool.Exec(ctx, inboxAppend, instance, seq, keys, deltas)
	return err
}

func readKeys(ctx context.Context, c *fleetConn, s *slots.Store, keys []string, inbox bool) error {
	if !inbox {
		_, err := s.Totals(ctx, keys)
		return err
	}
	rows, err := c.pool.Query(ctx, inboxRead, keys)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

func sumCPU(cs []*fleetConn) int64 {
	var sum int64
	for _, c := range cs {
		t, _ := c.cpu()
		sum += t
	}
	return sum
}

// schemaRows is the schema's rows inserted, updated and deleted so far,
// once every backend in cs has reported its statistics: PostgreSQL 15
// reports an idle backend's up to 10 s late unless told to flush, which
// pg_stat_force_next_flush does before the backend next goes idle (and
// so before its reply).
func schemaRows(b *testing.B, db *pgtest.DB, cs []*fleetConn) int64 {
	b.Helper()
	ctx := context.Background()
	pools := []*pgxpool.Pool{db.Pool}
	for _, c := range cs {
		pools = append(pools, c.pool)
	}
	for _, p := range pools {
		if _, err := p.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			b.Fatal(err)
		}
	}
	var n int64
	err := db.Pool.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint
		FROM pg_stat_user_tables WHERE schemaname = $1`, db.Schema).Scan(&n)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// procCPU returns process pid's CPU time in nanoseconds, or false when it
// cannot be read (a server on another machine): from /proc/PID/schedstat,
// to the nanosecond, else /proc/PID/stat's utime and stime, to the tick
// (10 ms, too coarse for one read).
func procCPU(pid int) (int64, bool) {
	if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid)); err == nil {
		if f := strings.Fields(string(raw)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return ns, true
			}
		}
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	// USER_HZ is 100 on Linux whatever the kernel's tick rate.
	return (utime + stime) * int64(time.Second/100), err1 == nil && err2 == nil
}

// walReader measures WAL: with pg_walinspect, the bytes of the records
// that touch one schema's relations (other tests share the server and
// write WAL of their own); without it, the server's whole WAL.
type walReader struct {
	schema string // where pg_walinspect lives; "" when unavailable
	lsn    string
}

// walMeter creates pg_walinspect in db's schema (dropped with it), or
// finds it where it already is.
func walMeter(b *testing.B, db *pgtest.DB) *walReader {
	b.Helper()
	ctx := context.Background()
	w := &walReader{}
	_, err := db.Pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA `+db.Schema)
	if err == nil {
		err = db.Pool.QueryRow(ctx, `SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_walinspect'`).Scan(&w.schema)
	}
	if err != nil {
		b.Logf("WAL-B/incr is the whole server's WAL: pg_walinspect: %v", err)
		w.schema = ""
	}
	return w
}

// start notes where the WAL is now.
func (w *walReader) start(b *testing.B, db *pgtest.DB) {
	b.Helper()
	if err := db.Pool.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&w.lsn); err != nil {
		b.Fatal(err)
	}
}

// since is the WAL written since start: the schema's records, or all.
func (w *walReader) since(b *testing.B, db *pgtest.DB) int64 {
	b.Helper()
	ctx := context.Background()
	var n int64
	if w.schema != "" {
		// The schema's relations, their TOAST tables and those tables'
		// indexes, by file node as block references name them.
		err := db.Pool.QueryRow(ctx, `
WITH rels AS (
    SELECT c.oid, c.reltoastrelid FROM pg_class c WHERE c.relnamespace = $2::regnamespace
), nodes AS (
    SELECT pg_relation_filenode(oid) AS node FROM rels
    UNION SELECT pg_relation_filenode(reltoastrelid) FROM rels WHERE reltoastrelid <> 0
    UNION SELECT pg_relation_filenode(i.indexrelid) FROM pg_index i JOIN rels r ON i.indrelid = r.reltoastrelid
)
SELECT coalesce(sum(w.record_length), 0)::bigint
FROM `+w.schema+`.pg_get_wal_records_info_till_end_of_wal($1::pg_lsn) AS w
WHERE w.block_ref IS NOT NULL
  AND substring(w.block_ref FROM 'rel \d+/\d+/(\d+)')::oid IN (SELECT node FROM nodes WHERE node IS NOT NULL)`,
			w.lsn, db.Schema).Scan(&n)
		if err == nil {
			return n
		}
		b.Logf("WAL-B/incr is the whole server's WAL: pg_walinspect: %v", err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, w.lsn).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
