package main

import (
	"bytes"
	"context"
	"image"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/pgtest"
)

func TestFleetShares(t *testing.T) {
	t.Parallel()
	f := func(total, n int, want ...int) {
		t.Helper()
		got := fleetShares(total, n)
		sum := 0
		for _, s := range got {
			sum += s
		}
		if !slices.Equal(got, want) || sum != total {
			t.Errorf("fleetShares(%d, %d) = %v (sum %d); want %v", total, n, got, sum, want)
		}
	}
	f(400000, 1, 400000)
	f(400000, 4, 100000, 100000, 100000, 100000)
	f(400000, 32, append(slices.Repeat([]int{12512}, 8), slices.Repeat([]int{12496}, 24)...)...)
	f(48, 2, 32, 16)
	for _, c := range []struct{ in, want string }{
		{"postgres://u@/counterd?host=/tmp&port=5440", "postgres://u@/x_fleet?host=/tmp&port=5440"},
		{"host=/tmp dbname=counterd", "host=/tmp dbname=counterd dbname=x_fleet"},
	} {
		if got, err := withDatabase(c.in, "x_fleet"); err != nil || got != c.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if got := []int{fleetClients(1), fleetClients(4), fleetClients(16), fleetClients(32), fleetClients(64)}; !slices.Equal(got, []int{50, 12, 3, 1, 1}) {
		t.Errorf("clients a daemon: got %v; want 50, 12, 3, 1, 1", got)
	}
}

// TestFleetShort runs the fleet section with one and two daemons and a
// few thousand increments, without waiting for PostgreSQL's statistics to
// settle, and checks what its rows claim: every cell exact, rows,
// transactions, WAL and CPU measured, a probe shown for every cell, the
// chart, and no process left behind. It never judges speed, and shares
// the database with other tests, so it checks no transaction count. Not
// parallel: it starts processes, which TestRunShort's leftover check
// would see.
func TestFleetShort(t *testing.T) {
	out, stderr := runFleetShort(t, "COUNTERBENCH_FLEET_SIZES=1,2", "COUNTERBENCH_FLEET_REQUESTS=3200", "COUNTERBENCH_FLEET_KEYS=100,10000")
	if !strings.Contains(stderr.String(), "[1/12] fleet counterd ×1 -r 100 -P 1 -n 3200") ||
		!strings.Contains(stderr.String(), "[12/12] fleet Redis buffer + 1 s worker -r 10000 -P 16 -n 3200") {
		t.Errorf("progress lines missing from stderr:\n%s", stderr.String())
	}
	rows := readCSV(t, filepath.Join(out, report.CSVFile))
	if len(rows) != 12 {
		t.Fatalf("%d rows; want 12", len(rows))
	}
	_, redisErr := exec.LookPath("redis-server")
	_, toolErr := exec.LookPath("redis-benchmark")
	cells := map[string]int{}
	for _, r := range rows {
		name := r["approach"] + " ×" + r["daemons"] + " " + r["keys"] + " -P " + r["pipeline"]
		cells[name]++
		if r["missing"] == "true" {
			if !(toolErr != nil && strings.Contains(r["note"], "redis-benchmark")) &&
				!(redisErr != nil && r["approach"] == report.Peer && strings.Contains(r["note"], "redis-server")) {
				t.Errorf("%s missing: %q", name, r["note"])
			}
			continue
		}
		// The load and at least the first probe, sent as the load starts.
		incr, probes := num(t, r, "increments"), num(t, r, "probes")
		if probes < 1 || incr != 3200+probes || r["exact"] != "true" {
			t.Errorf("%s: %d increments with %d probes, exact %s; want 3200 and the probes, stored exactly", name, incr, probes, r["exact"])
		}
		if num(t, r, "rows_written") < 1 || r["transactions"] == "" || r["wal_bytes_per_incr"] == "" ||
			r["pg_server_cpu_us_per_incr"] == "" || r["server_cpu_us_per_incr"] == "" || r["staleness_max_ms"] == "" || r["drain_seconds"] == "" {
			t.Errorf("%s: rows %s, transactions %q, WAL %q, PostgreSQL CPU %q, sidecar CPU %q, staleness %q, drain %q; want all",
				name, r["rows_written"], r["transactions"], r["wal_bytes_per_incr"], r["pg_server_cpu_us_per_incr"], r["server_cpu_us_per_incr"], r["staleness_max_ms"], r["drain_seconds"])
		}
		wantEach := num(t, r, "daemons")
		if r["approach"] == report.Peer {
			wantEach = 0
			if r["worker_cpu_us_per_incr"] == "" {
				t.Errorf("%s: no worker CPU", name)
			}
		}
		if each := strings.Fields(r["daemon_cpu_us_per_own_incr"]); int64(len(each)) != wantEach {
			t.Errorf("%s: CPU of %d daemons %q; want %d", name, len(each), r["daemon_cpu_us_per_own_incr"], wantEach)
		}
	}
	for _, k := range []string{"100", "10,000"} {
		for _, p := range []string{"1", "16"} {
			for _, s := range []string{"counterd ×1", "counterd ×2", report.Peer + " ×0"} {
				if name := s + " " + k + " -P " + p; cells[name] != 1 {
					t.Errorf("cell %s: %d rows; want 1", name, cells[name])
				}
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## Fleet: N sidecars on one PostgreSQL", "### 10,000 keys", "| counterd ×2 | 16 | 50 |", "](fleet.png)", report.FleetLogFile} {
		if !bytes.Contains(md, []byte(s)) {
			t.Errorf("bench.md lacks %q", s)
		}
	}
	f, err := os.Open(filepath.Join(out, report.FleetChartFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, format, err := image.Decode(f); err != nil || format != "png" {
		t.Errorf("%s: %v, format %q; want a PNG", report.FleetChartFile, err, format)
	}
}

// TestFleetPacedShort runs the fleet section paced (COUNTERBENCH_FLEET_RATE)
// on one workload: every cell exact, offered the rate, never sent faster
// than it (the pacer's bound, whatever the machine's speed), and the
// report says the load was paced. Not parallel, as TestFleetShort.
func TestFleetPacedShort(t *testing.T) {
	out, _ := runFleetShort(t, "COUNTERBENCH_FLEET_SIZES=1,2", "COUNTERBENCH_FLEET_REQUESTS=1600", "COUNTERBENCH_FLEET_KEYS=100",
		"COUNTERBENCH_FLEET_RATE=4000")
	rows := readCSV(t, filepath.Join(out, report.CSVFile))
	if len(rows) != 6 {
		t.Fatalf("%d rows; want 6", len(rows))
	}
	for _, r := range rows {
		name := r["approach"] + " ×" + r["daemons"] + " -P " + r["pipeline"]
		if r["missing"] == "true" {
			if _, err := exec.LookPath("redis-server"); err == nil || r["approach"] != report.Peer {
				t.Errorf("%s missing: %q", name, r["note"])
			}
			continue
		}
		incr, probes := num(t, r, "increments"), num(t, r, "probes")
		if probes < 1 || incr != 1600+probes || r["exact"] != "true" {
			t.Errorf("%s: %d increments with %d probes, exact %s; want 1600 and the probes, stored exactly", name, incr, probes, r["exact"])
		}
		if r["offered_per_s"] != "4000.0" {
			t.Errorf("%s: offered %q; want 4000.0", name, r["offered_per_s"])
		}
		// The load's own rate (the probes aside) cannot pass the pace:
		// 1,600 increments take at least 0.4 s, whatever the machine.
		if rate, err := strconv.ParseFloat(r["incr_per_s"], 64); err != nil || rate > 4000*1.05+float64(probes)/0.4 {
			t.Errorf("%s: %q increments a second; want at most the 4,000 offered", name, r["incr_per_s"])
		}
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(md, []byte("paced at 4,000 increments a second")) || !bytes.Contains(md, []byte("paced at 4,000 a second in all")) {
		t.Errorf("bench.md does not say the load was paced:\n%s", md)
	}
}

// TestBackendsGoneCountsOwnDatabase checks that a fleet cell waits only
// for its own database's backends: a connection of the same
// application_name in another database (another benchmark's fleet on the
// same server) does not hold it, where it used to wait 30 s and fail the
// cell; one in its own database does.
func TestBackendsGoneCountsOwnDatabase(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	app := "counterbench-fleet-" + db.Schema
	connect := func(database string) *pgx.Conn {
		t.Helper()
		u := pgtest.URL(t)
		if database != "" {
			var err error
			if u, err = withDatabase(u, database); err != nil {
				t.Fatal(err)
			}
		}
		u, err := withParam(u, "application_name", app)
		if err != nil {
			t.Fatal(err)
		}
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	b := &bench{fleetPool: db.Pool}
	connect("postgres")
	if err := b.waitBackendsGone(ctx, []string{app}); err != nil {
		t.Fatalf("a backend of the same name in another database: %v; want no wait", err)
	}
	own := connect("")
	short, stop := context.WithTimeout(ctx, 500*time.Millisecond)
	defer stop()
	if err := b.waitBackendsGone(short, []string{app}); err == nil {
		t.Fatal("waitBackendsGone returned while a backend of the cell's own database was open")
	}
	own.Close(ctx)
	if err := b.waitBackendsGone(ctx, []string{app}); err != nil {
		t.Fatalf("after the cell's own backend closed: %v", err)
	}
}

// runFleetShort runs the fleet section alone with settings (and no
// statistics settle) into a directory it returns with the run's stderr,
// dropping the section's database afterwards, and checks the run left no
// process behind.
func runFleetShort(t *testing.T, settings ...string) (out string, stderr *bytes.Buffer) {
	t.Helper()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
	t.Cleanup(func() {
		q := "DROP DATABASE IF EXISTS " + pgx.Identifier{fleetDatabase(db.Schema)}.Sanitize() + " WITH (FORCE)"
		if _, err := db.Pool.Exec(context.Background(), q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	})
	out = t.TempDir()
	env := append(shortEnv(t, db, out), "COUNTERBENCH_SECTIONS=fleet", "COUNTERBENCH_FLEET_SETTLE=0s")
	env = append(env, settings...)
	var stdout bytes.Buffer
	stderr = new(bytes.Buffer)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, nil, env, &stdout, stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
	return out, stderr
}
