package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/proctest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

const (
	targetPosts   = 1000
	targetWriters = 32
	// Keys post:N:likes with N past targetPosts have no row.
	missingPosts = 20
)

// withAppName sets application_name in a connection URL, so the test can
// find that process's backend in pg_stat_activity.
func withAppName(t *testing.T, raw, name string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// 32 writers increment likes of 1,000 posts (and of posts that do not
// exist) while a scheduled rollup folds every second and rollup once
// processes are killed with SIGKILL in the middle of their pass, inside
// a chunk's transaction after at least one chunk has committed. In the
// end posts.like_count equals the increments of each post exactly, every
// key's counter_totals does too, and the keys with no row are reported.
func TestTargetsExactAcrossKill9(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	for _, sql := range []string{
		`CREATE TABLE posts (id integer PRIMARY KEY, like_count integer NOT NULL DEFAULT 0)`,
		fmt.Sprintf(`INSERT INTO posts (id) SELECT generate_series(1, %d)`, targetPosts),
	} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	const spec = "post:{id}:likes=posts.like_count"

	// Writers: each batch is 20 distinct keys, written exactly once
	// (ApplyOnce, retried with its id until it commits).
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		written = map[string]int64{}
		werr    error
	)
	stop := make(chan struct{})
	for w := range targetWriters {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 12))
			id := store.Identity{Instance: fmt.Sprintf("w%d", w)}
			for seq := uint64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				seen := map[string]bool{}
				var batch []change.Change
				for len(batch) < 20 {
					key := fmt.Sprintf("post:%d:likes", 1+rng.IntN(targetPosts+missingPosts))
					if rng.IntN(20) == 0 {
						key = fmt.Sprintf("other:%d", rng.IntN(50))
					}
					if seen[key] {
						continue
					}
					seen[key] = true
					batch = append(batch, change.Change{Kind: change.Total, Key: key, Delta: int64(1 + rng.IntN(3))})
				}
				var err error
				for range 20 {
					if _, err = st.ApplyOnce(ctx, store.BatchID{Identity: id, Seq: seq}, batch); err == nil {
						break
					}
				}
				mu.Lock()
				if err != nil {
					werr = fmt.Errorf("writer %d: %w", w, err)
				} else {
					for _, c := range batch {
						written[c.Key] += c.Delta
					}
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(halt)

	// A scheduled rollup folds concurrently with the ones killed.
	sched := exec.Command(binary)
	sched.Env = []string{"DATABASE_URL=" + db.URL, "ROLLUP_SCHEDULE=@every 1s", "ROLLUP_CHUNK=200", "ROLLUP_TARGETS=" + spec}
	sched.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
	var schedLog strings.Builder
	sched.Stderr = &schedLog
	if err := sched.Start(); err != nil {
		t.Fatal(err)
	}
	var schedErr error
	schedDone := make(chan struct{})
	go func() { schedErr = sched.Wait(); close(schedDone) }()
	t.Cleanup(func() { _ = sched.Process.Kill(); <-schedDone })

	waitBacklog := func(rows int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			var n int64
			if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counter_slots`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n >= rows {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("backlog: %d slot rows after 60s; want %d", n, rows)
			}
			time.Sleep(10 * time.Millisecond) // polling the database for a state, not waiting for time
		}
	}

	kills := 0
	for round := range 3 {
		waitBacklog(1500)
		app := fmt.Sprintf("victim%d", round)
		// Hold the row of the post whose key the fold reaches last, and
		// give that key a slot row no fold can take while the row is
		// held, so the victim, folding in key order, commits the chunks
		// before it and then waits for it: killed there, it is mid-pass,
		// inside a chunk's transaction. (Before, the test killed it once
		// it saw a second chunk in pg_stat_activity, which a fast machine
		// could miss.)
		var last string
		if err := db.Pool.QueryRow(ctx, `SELECT max('post:' || id || ':likes') FROM posts`).Scan(&last); err != nil {
			t.Fatal(err)
		}
		var postID int
		if _, err := fmt.Sscanf(last, "post:%d:likes", &postID); err != nil {
			t.Fatal(err)
		}
		held, err := db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = held.Rollback(ctx) }) // on a failure, before the others wait on it
		if _, err := held.Exec(ctx, `SELECT FROM posts WHERE id = $1 FOR UPDATE`, postID); err != nil {
			t.Fatal(err)
		}
		bait := []change.Change{{Kind: change.Total, Key: last, Delta: 1}}
		if _, err := st.ApplyOnce(ctx, store.BatchID{Identity: store.Identity{Instance: "bait"}, Seq: uint64(round + 1)}, bait); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		written[last]++
		mu.Unlock()
		victim := exec.Command(binary, "once")
		victim.Env = []string{"DATABASE_URL=" + withAppName(t, db.URL, app), "ROLLUP_CHUNK=5", "ROLLUP_TARGETS=" + spec}
		victim.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
		var victimOut strings.Builder
		victim.Stdout, victim.Stderr = &victimOut, &victimOut
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- victim.Wait() }()
		killed := false
		for deadline := time.Now().Add(time.Minute); !killed; time.Sleep(10 * time.Millisecond) {
			select {
			case err := <-done:
				t.Fatalf("round %d: the victim finished (%v) while post %d's row was held:\n%s", round, err, postID, victimOut.String())
			default:
			}
			var waiting bool
			err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
WHERE application_name = $1 AND wait_event_type = 'Lock')`, app).Scan(&waiting)
			if err != nil {
				t.Fatal(err)
			}
			if waiting {
				_ = victim.Process.Signal(syscall.SIGKILL)
				killed = true
				<-done
			} else if time.Now().After(deadline) {
				t.Fatalf("round %d: the victim never waited for post %d's row", round, postID)
			}
		}
		if err := held.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if killed {
			kills++
		}
		t.Logf("round %d: killed while waiting for post %d's row", round, postID)
	}
	if kills == 0 {
		t.Fatal("no rollup was killed mid-pass; the backlog was folded before the watcher saw a chunk")
	}

	halt()
	if werr != nil {
		t.Fatal(werr)
	}
	_ = sched.Process.Signal(syscall.SIGTERM)
	<-schedDone
	if schedErr != nil {
		t.Fatalf("scheduled rollup: %v\n%s", schedErr, schedLog.String())
	}
	final := exec.Command(binary, "once")
	final.Env = []string{"DATABASE_URL=" + db.URL, "ROLLUP_TARGETS=" + spec}
	var stderr strings.Builder
	final.Stderr = &stderr
	out, err := final.Output()
	if err != nil {
		t.Fatalf("final rollup: %v\n%s%s", err, out, stderr.String())
	}
	if n := sum(t, db, "counter_slots", "count"); n != 0 {
		t.Fatalf("slot rows left after the final pass: sum %d", n)
	}

	likes := map[int]int64{}
	rows, err := db.Pool.Query(ctx, `SELECT id, like_count FROM posts`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		likes[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var total, bad int64
	for id := 1; id <= targetPosts; id++ {
		want := written[fmt.Sprintf("post:%d:likes", id)]
		total += want
		if likes[id] != want {
			bad++
			if bad <= 5 {
				t.Errorf("posts.like_count of %d: got %d; want %d", id, likes[id], want)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d posts off", bad)
	}
	keys := make([]string, 0, len(written))
	for k := range written {
		keys = append(keys, k)
	}
	trows, err := db.Pool.Query(ctx, `SELECT key, total FROM counter_totals($1)`, keys)
	if err != nil {
		t.Fatal(err)
	}
	for trows.Next() {
		var k string
		var n int64
		if err := trows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		if n != written[k] {
			t.Errorf("counter_totals %s: got %d; want %d", k, n, written[k])
		}
	}
	if err := trows.Err(); err != nil {
		t.Fatal(err)
	}
	// Keys of posts that do not exist were reported by some pass: the
	// scheduler's log names them.
	if !strings.Contains(schedLog.String()+stderr.String(), "rollup target rows missing") {
		t.Errorf("no pass reported the keys with no row; logs:\n%s%s", schedLog.String(), stderr.String())
	}
	t.Logf("%d likes over %d posts exact across %d kills mid-pass", total, targetPosts, kills)
}

// rollup once reports keys with no row: on stdout, in a log line naming
// a sample of them, and (for the scheduler) in
// counterd_rollup_target_missing_keys_total, in a /metrics promtool
// accepts; counter_totals keeps them.
func TestTargetsMissingRowReported(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	for _, sql := range []string{
		`CREATE TABLE posts (id bigint PRIMARY KEY, like_count bigint)`,
		`INSERT INTO posts VALUES (1, NULL)`,
		`INSERT INTO counter_slots (key, slot, count) VALUES ('post:1:likes', 0, 2), ('post:2:likes', 0, 3), ('post:zz:likes', 0, 4)`,
	} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"DATABASE_URL=" + db.URL, "ROLLUP_TARGETS=post:{id}:likes=posts.like_count"}
	cmd := exec.Command(binary, "once")
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rollup once: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(string(out), "2 target keys with no row") {
		t.Errorf("stdout %q; want it to count 2 target keys with no row", out)
	}
	log := stderr.String()
	if !strings.Contains(log, "rollup target rows missing") || !strings.Contains(log, "keys=2") ||
		!strings.Contains(log, "post:2:likes") || !strings.Contains(log, "post:zz:likes") {
		t.Errorf("log %q; want a warning naming both keys", log)
	}
	if got := sum(t, db, "posts", "like_count"); got != 2 {
		t.Errorf("like_count: got %d; want 2", got)
	}
	if got := sum(t, db, "counter_totals", "total"); got != 9 {
		t.Errorf("counter_totals: got %d; want 9, nothing lost", got)
	}

	// The scheduler exposes the count.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counter_slots (key, slot, count) VALUES ('post:3:likes', 0, 1)`); err != nil {
		t.Fatal(err)
	}
	sched := exec.Command(binary)
	sched.Env = append(env, "ROLLUP_SCHEDULE=@every 1s", "ROLLUP_METRICS_ADDR=127.0.0.1:0")
	sched.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
	pr, pw := io.Pipe()
	sched.Stderr = pw
	if err := sched.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sched.Wait(); pw.Close(); close(exited) }()
	t.Cleanup(func() { _ = sched.Process.Kill(); <-exited })
	addr := make(chan string, 1)
	passed := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.OnceFunc(func() { close(passed) })
		for sc.Scan() {
			line := sc.Text()
			if _, a, ok := strings.Cut(line, `msg="metrics listening" addr=`); ok {
				addr <- a
			}
			if strings.Contains(line, "rollup target rows missing") {
				once()
			}
		}
	}()
	var metricsAddr string
	select {
	case metricsAddr = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("no metrics address logged")
	}
	select {
	case <-passed:
	case <-time.After(30 * time.Second):
		t.Fatal("no pass reported the missing row within 30s")
	}
	body := get(t, "http://"+metricsAddr+"/metrics")
	want := `counterd_rollup_target_missing_keys_total{target="post:{id}:likes=posts.like_count"} 1`
	if !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s:\n%s", want, body)
	}
	docsListRollupMetrics(t, body)
	// Every family has help text, and promtool accepts it with exit 0.
	if missing := proctest.MissingHelp(body); len(missing) > 0 {
		t.Errorf("/metrics families without help text: %v", missing)
	}
	proctest.CheckMetrics(t, body)
}

// docsListRollupMetrics checks that docs/operations.md's metrics section
// names exactly the counterd_rollup_* metrics the scheduler exposes.
func docsListRollupMetrics(t *testing.T, body string) {
	t.Helper()
	var exposed []string
	for _, line := range strings.Split(body, "\n") {
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		if strings.HasPrefix(name, "counterd_rollup_") && !slices.Contains(exposed, name) {
			exposed = append(exposed, name)
		}
	}
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n## Metrics and health\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("`(counterd_rollup_[a-z0-9_]+)`").FindAllStringSubmatch(section, -1) {
		if !slices.Contains(documented, m[1]) {
			documented = append(documented, m[1])
		}
	}
	slices.Sort(exposed)
	slices.Sort(documented)
	if !slices.Equal(exposed, documented) {
		t.Errorf("rollup metrics: exposed %v; docs/operations.md's metrics list names %v", exposed, documented)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A bad ROLLUP_TARGETS stops the rollup at start with exit 2 and a line
// naming the variable and what is wrong: its syntax before connecting,
// its table and column against the catalog after.
func TestTargetsBadConfigExitsTwo(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	if _, err := db.Pool.Exec(context.Background(), `CREATE TABLE posts (id integer PRIMARY KEY, like_count integer, title text)`); err != nil {
		t.Fatal(err)
	}
	f := func(spec, want string) {
		t.Helper()
		cmd := exec.Command(binary, "once")
		cmd.Env = []string{"DATABASE_URL=" + db.URL, "ROLLUP_TARGETS=" + spec}
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "ROLLUP_TARGETS") || !strings.Contains(string(out), want) {
			t.Errorf("ROLLUP_TARGETS=%s: %v, %q; want exit 2 naming ROLLUP_TARGETS and %q", spec, err, out, want)
		}
	}
	f("post:likes=posts.like_count", "no {id} placeholder")
	f("post:{id}:{id}=posts.like_count", "2 {id} placeholders")
	f("post:{id}=posts.like count", "is not an identifier")
	f("post:{id}=nope.like_count", `table "nope" does not exist`)
	f("post:{id}=posts.nope", `column "nope" does not exist`)
	f("post:{id}=posts.title", "column title is text")
}
