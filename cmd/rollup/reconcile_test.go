package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

// The app's likes and the reconcile's settings for them.
const (
	likesTable     = `CREATE TABLE likes (post_id integer NOT NULL, user_id integer NOT NULL, PRIMARY KEY (post_id, user_id))`
	likesQuery     = `SELECT 'post:' || post_id || ':likes', user_id::text::bytea FROM likes`
	likesKeys      = `post:*:likes`
	reconcileEnvQ  = "ROLLUP_SET_RECONCILE=" + likesQuery
	reconcileEnvK  = "ROLLUP_SET_RECONCILE_KEYS=" + likesKeys
	setDriftSQL    = `SELECT count(*) FROM ((SELECT k, m FROM app EXCEPT SELECT key, member FROM ours) UNION ALL (SELECT key, member FROM ours EXCEPT SELECT k, m FROM app)) AS d`
	setDriftPrefix = `WITH app(k, m) AS (` + likesQuery + `), ours AS (SELECT key, member FROM counter_set_members WHERE added_at IS NOT NULL AND key LIKE 'post:%:likes') `
)

// setDrift counts the (key, member) pairs counterd's sets and the likes
// table differ by, and the keys whose total is not their member count.
func setDrift(t *testing.T, db *pgtest.DB) (members, totals int64) {
	t.Helper()
	ctx := context.Background()
	if err := db.Pool.QueryRow(ctx, setDriftPrefix+setDriftSQL).Scan(&members); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `
		SELECT count(*) FROM (
			SELECT key FROM counter_set_members WHERE key LIKE 'post:%:likes' GROUP BY key
			HAVING count(*) FILTER (WHERE added_at IS NOT NULL)
			    <> coalesce((SELECT t.total FROM counter_totals(ARRAY[key]) t), 0)) AS k`).Scan(&totals); err != nil {
		t.Fatal(err)
	}
	return members, totals
}

// setOp is one SADD (add) or SREM of user to post's likes, accepted at
// tok.
func setOp(post, user int, tok int64, add bool) change.Change {
	return change.SetOpChange(fmt.Sprintf("post:%d:likes", post), []byte(strconv.Itoa(user)), tok, add)
}

// reconciledRE is rollup once's line for a reconcile.
var reconciledRE = regexp.MustCompile(`(?m)^reconciled (\d+) set keys with the app's table in \S+: added (\d+) members, removed (\d+)$`)

// rollupOnceSets runs rollup once with the reconcile and returns the
// keys, members added and removed it printed.
func rollupOnceSets(t *testing.T, db *pgtest.DB, env ...string) (keys, added, removed int64) {
	t.Helper()
	cmd := exec.Command(binary, "once")
	cmd.Env = append([]string{"DATABASE_URL=" + db.URL, reconcileEnvQ, reconcileEnvK}, env...)
	cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rollup once: %v\n%s%s", err, out, stderr.String())
	}
	m := reconciledRE.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("rollup once printed no reconcile:\n%s", out)
	}
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	return n(m[1]), n(m[2]), n(m[3])
}

// seedLikes makes posts 1..posts liked by users 1..users where
// (post+user)%3 != 0, in the likes table and, through the store, in
// counterd's sets, accepted an hour ago.
func seedLikes(t *testing.T, db *pgtest.DB, st *slots.Store, posts, users int) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, likesTable); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO likes SELECT p, u FROM generate_series(1, $1) p, generate_series(1, $2) u WHERE (p + u) % 3 <> 0`, posts, users); err != nil {
		t.Fatal(err)
	}
	tok := time.Now().Add(-time.Hour).UnixMicro()
	var cs []change.Change
	for p := 1; p <= posts; p++ {
		for u := 1; u <= users; u++ {
			if (p+u)%3 != 0 {
				tok++
				cs = append(cs, setOp(p, u, tok, true))
			}
		}
	}
	if _, err := st.ApplyOnce(ctx, store.BatchID{Identity: store.Identity{Instance: "seed"}, Seq: 1}, cs); err != nil {
		t.Fatal(err)
	}
}

// injectDrift loses members of posts 1..3 with their counts, adds
// members no like is behind to posts 4 and 5 with theirs, and gives
// post 9999 (no likes at all) a member: 3*lost lost, 2*extra+1 extra.
func injectDrift(t *testing.T, db *pgtest.DB, lost, extra int) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`WITH gone AS (
			DELETE FROM counter_set_members c USING (
				SELECT key, member, row_number() OVER (PARTITION BY key ORDER BY member) AS n
				FROM counter_set_members WHERE key IN ('post:1:likes', 'post:2:likes', 'post:3:likes') AND added_at IS NOT NULL) AS p
			WHERE c.key = p.key AND c.member = p.member AND p.n <= ` + strconv.Itoa(lost) + `
			RETURNING c.key)
		INSERT INTO counter_slots (key, slot, count) SELECT key, 7, -count(*) FROM gone GROUP BY key
		ON CONFLICT (key, slot) DO UPDATE SET count = counter_slots.count + excluded.count`,
		`WITH more AS (
			INSERT INTO counter_set_members (key, member, added_at, changed_at)
			SELECT 'post:' || p || ':likes', ('x' || i)::bytea, now() - interval '1 hour', now() - interval '1 hour'
			FROM generate_series(4, 5) p, generate_series(1, ` + strconv.Itoa(extra) + `) i
			UNION ALL SELECT 'post:9999:likes', 'x'::bytea, now() - interval '1 hour', now() - interval '1 hour'
			ON CONFLICT (key, member) DO UPDATE SET added_at = excluded.added_at, changed_at = excluded.changed_at
			RETURNING key)
		INSERT INTO counter_slots (key, slot, count) SELECT key, 7, count(*) FROM more GROUP BY key
		ON CONFLICT (key, slot) DO UPDATE SET count = counter_slots.count + excluded.count`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}

// A pass with ROLLUP_SET_RECONCILE repairs sets that drifted from the
// app's likes table both ways, and the key the app has no row of, and
// leaves a key outside ROLLUP_SET_RECONCILE_KEYS alone; rollup once
// prints what it repaired, a second run repairs nothing, and the
// scheduler counts the drift in counterd_rollup_set_reconcile_*_total.
func TestSetReconcileRepairsDrift(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const posts, users = 20, 30
	seedLikes(t, db, st, posts, users)
	// A set outside the patterns, which the reconcile must not touch.
	if _, err := st.ApplyOnce(ctx, store.BatchID{Identity: store.Identity{Instance: "other"}, Seq: 1},
		[]change.Change{change.SetOpChange("other:1", []byte("a"), time.Now().Add(-time.Hour).UnixMicro(), true)}); err != nil {
		t.Fatal(err)
	}
	if m, k := setDrift(t, db); m != 0 || k != 0 {
		t.Fatalf("drift before injecting any: %d members, %d totals", m, k)
	}
	injectDrift(t, db, 4, 3)
	if m, k := setDrift(t, db); m != 3*4+2*3+1 || k != 0 {
		t.Fatalf("drift injected: %d members, %d totals wrong; want 19, 0", m, k)
	}
	keys, added, removed := rollupOnceSets(t, db)
	if keys != posts+1 || added != 12 || removed != 7 {
		t.Fatalf("rollup once reconciled %d keys, added %d, removed %d; want %d, 12, 7", keys, added, removed, posts+1)
	}
	if m, k := setDrift(t, db); m != 0 || k != 0 {
		t.Fatalf("drift after the reconcile: %d members, %d totals wrong", m, k)
	}
	if got := total(t, db, "other:1"); got != 1 {
		t.Fatalf("other:1's total %d; want 1, untouched", got)
	}
	if _, added, removed := rollupOnceSets(t, db); added != 0 || removed != 0 {
		t.Fatalf("second rollup once added %d, removed %d; want nothing", added, removed)
	}

	// The scheduler counts the drift it repairs.
	injectDrift(t, db, 2, 1)
	sched := exec.Command(binary)
	sched.Env = []string{"DATABASE_URL=" + db.URL, reconcileEnvQ, reconcileEnvK,
		"ROLLUP_SCHEDULE=@every 1s", "ROLLUP_METRICS_ADDR=127.0.0.1:0"}
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
	repaired := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if _, a, ok := strings.Cut(line, `msg="metrics listening" addr=`); ok {
				addr <- a
			}
			if strings.Contains(line, "set reconcile repaired drift") {
				select {
				case repaired <- line:
				default:
				}
			}
		}
	}()
	var metricsAddr, line string
	select {
	case metricsAddr = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("no metrics address logged")
	}
	select {
	case line = <-repaired:
	case <-time.After(30 * time.Second):
		t.Fatal("no pass reported the drift within 30s")
	}
	if !strings.Contains(line, "added=6") || !strings.Contains(line, "removed=3") || !strings.Contains(line, "post:1:likes") {
		t.Errorf("log line %q; want added=6 removed=3 and a sample naming post:1:likes", line)
	}
	body := get(t, "http://"+metricsAddr+"/metrics")
	for _, want := range []string{"counterd_rollup_set_reconcile_added_total 6", "counterd_rollup_set_reconcile_removed_total 3",
		fmt.Sprintf("counterd_rollup_set_reconcile_keys_total %d", posts+1)} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	if m, k := setDrift(t, db); m != 0 || k != 0 {
		t.Fatalf("drift after the scheduler's reconcile: %d members, %d totals wrong", m, k)
	}
}

func total(t *testing.T, db *pgtest.DB, key string) int64 {
	t.Helper()
	var n int64
	if err := db.Pool.QueryRow(context.Background(),
		`SELECT coalesce((SELECT total FROM counter_totals(ARRAY[$1::text])), 0)`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// SADD/SREM keep flowing (through the store, as a daemon's rounds) while
// rollup once reconciles again and again, with no margin: each writer
// keeps the app's contract (the like committed before SADD, deleted
// before SREM) and owns its users, so once its operation on a member is
// decided, no reconcile may change that member: before its next
// operation on it, the member must still be as its likes row says (a
// difference is an operation a reconcile undid; a reply 0 is not, as a
// reconcile whose snapshot has the like may add the member before its
// SADD is decided). The members end as the likes say, each total its member count,
// before a last quiet reconcile, which then repairs nothing. The drift
// injected at the start (members lost from posts 1..3, which no writer
// touches, and members no like is behind in posts 4, 5 and 9999) is
// repaired by the reconciles running meanwhile.
func TestSetReconcileWhileWriting(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers(), Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const posts, users, writers, ops = 9, 40, 4, 250
	seedLikes(t, db, st, posts, users)
	injectDrift(t, db, 3, 2)

	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			id := store.BatchID{Identity: store.Identity{Instance: fmt.Sprintf("w%d", w)}}
			var last int64
			touched := map[[2]int]bool{}
			for range ops {
				post, user := 4+rng.IntN(posts-3), 1+w+writers*rng.IntN(users/writers) // w's users
				var liked, member bool
				if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM likes WHERE post_id = $1 AND user_id = $2),
					counter_set_contains('post:' || $1 || ':likes', $2::text::bytea)`, post, user).Scan(&liked, &member); err != nil {
					errs <- err
					return
				}
				if touched[[2]int{post, user}] && member != liked {
					errs <- fmt.Errorf("post %d user %d: liked %v, member %v after this writer's last operation on it: a reconcile undid it",
						post, user, liked, member)
					return
				}
				touched[[2]int{post, user}] = true
				q := `INSERT INTO likes VALUES ($1, $2)`
				if liked {
					q = `DELETE FROM likes WHERE post_id = $1 AND user_id = $2`
				}
				if _, err := db.Pool.Exec(ctx, q, post, user); err != nil {
					errs <- err
					return
				}
				// Accepted after the app's commit, as a daemon accepts it.
				tok := max(last+1, time.Now().UnixMicro())
				last = tok
				id.Seq++
				c := setOp(post, user, tok, !liked)
				if _, err := st.ApplyOnce(ctx, id, []change.Change{c}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	runs := 0
	for stop := false; !stop && runs < 100; runs++ {
		select {
		case <-done:
			stop = true
		default:
		}
		rollupOnceSets(t, db, "ROLLUP_SET_RECONCILE_MARGIN=0s")
	}
	<-done
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if m, k := setDrift(t, db); m != 0 || k != 0 {
		t.Fatalf("after %d reconciles racing %d operations: %d members differ from the likes, %d totals from their member count",
			runs, writers*ops, m, k)
	}
	if _, added, removed := rollupOnceSets(t, db); added != 0 || removed != 0 {
		t.Fatalf("the quiet reconcile added %d, removed %d; want nothing", added, removed)
	}
	t.Logf("%d reconciles raced %d SADD/SREM", runs, writers*ops)
}
