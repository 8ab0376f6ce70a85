package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

// fenceEnv keeps every round in the journal until FLUSH, and the
// instance's lease short, so a refused copy exits within seconds.
var fenceEnv = []string{"COUNTERD_FLUSH_INTERVAL=1h", "COUNTERD_LEASE_TTL=1s", "COUNTERD_OWNER_TTL=2s"}

// secondDaemon returns a daemon like startDaemon's, not started, whose
// journal is dir.
func secondDaemon(t *testing.T, db *pgtest.DB, dir string) *daemon {
	t.Helper()
	d := newDaemon(t, db, fenceEnv...)
	d.journal = dir
	d.env = append(d.env, "COUNTERD_JOURNAL_DIR="+dir)
	t.Cleanup(d.kill)
	return d
}

// pipeIncr sends n INCR key, pipelined, and fails unless each is acknowledged.
func pipeIncr(t *testing.T, c *redis.Client, key string, n int) {
	t.Helper()
	cmds, err := c.Pipelined(context.Background(), func(p redis.Pipeliner) error {
		for range n {
			p.Incr(context.Background(), key)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("INCR %s: %v", key, err)
	}
	if len(cmds) != n {
		t.Fatalf("INCR %s: %d replies; want %d", key, len(cmds), n)
	}
}

// takeAll sends TAKE key 1 until the budget says 0 and returns how many
// units were granted. A daemon that stops answering ends it too.
func takeAll(t *testing.T, socket, key string) int64 {
	t.Helper()
	c := budgetClient(t, socket)
	var granted int64
	for range 100_000 {
		n, err := c.Do(context.Background(), "TAKE", key, 1).Int64()
		if err != nil || n == 0 {
			break
		}
		granted += n
	}
	return granted
}

// takeN sends TAKE key 1 n times and returns how many units were granted.
func takeN(t *testing.T, socket, key string, n int) int64 {
	t.Helper()
	c := budgetClient(t, socket)
	var granted int64
	for range n {
		got, err := c.Do(context.Background(), "TAKE", key, 1).Int64()
		if err != nil {
			t.Fatal(err)
		}
		granted += got
	}
	return granted
}

// refused starts d and fails the test unless it exits, before it is
// ready or soon after, with an error saying want.
func refused(t *testing.T, d *daemon, want string) {
	t.Helper()
	if d.launch() {
		// The rest of the test shows the harm of it serving.
		t.Errorf("the second daemon started; want it refused with %q", want)
		return
	}
	if d.err == nil {
		t.Fatalf("the second daemon exited 0; want an error\n%s", d.log())
	}
	if !strings.Contains(d.log(), want) {
		t.Fatalf("the second daemon's log does not say %q:\n%s", want, d.log())
	}
}

// liveOriginal starts the daemon the second one is tried against, with a
// budget b of 200 and 1,000 acknowledged INCR k in its open segment.
func liveOriginal(t *testing.T) (*pgtest.DB, *daemon, *redis.Client) {
	t.Helper()
	db := pgtest.New(t, pgtest.Options{})
	a := startDaemon(t, db, fenceEnv...)
	c := client(t, a.socket)
	ctx := context.Background()
	if err := c.Do(ctx, "BUDGET", "b", 200).Err(); err != nil {
		t.Fatal(err)
	}
	pipeIncr(t, c, "k", 1000)
	return db, a, c
}

// A copy of a live daemon's journal directory (cp -a, a volume snapshot,
// a cloned VM) holds the original's open segment, under the original's
// instance and generation. Started against the same database it used to
// commit that partial round; the original's full round was then dropped
// as a duplicate, and it returned the original's budget leases, which the
// original kept granting from. Now the copy is refused while the
// original is alive.
func TestCopiedJournalIsRefused(t *testing.T) {
	t.Parallel()
	db, a, c := liveOriginal(t)
	before := takeN(t, a.socket, "b", 20)

	copied := filepath.Join(shortDir(t), "journal")
	copyDir(t, a.journal, copied)
	os.Remove(filepath.Join(copied, "LOCK")) // as the adversary did; newer journals have none
	pipeIncr(t, c, "k", 500)                 // the original goes on filling its open segment

	b := secondDaemon(t, db, copied)
	refused(t, b, "in use by another live counterd")
	granted := before + takeAll(t, a.socket, "b")
	select {
	case <-b.exited:
	default:
		granted += takeAll(t, b.socket, "b")
		flush(t, b.socket)
	}
	flush(t, a.socket)
	if got := total(t, db, "k"); got != 1500 {
		t.Errorf("k = %d; want 1500 (every acknowledged INCR, once)", got)
	}
	if granted > 200 {
		t.Errorf("%d units granted from a budget of 200", granted)
	}
	if row := readBudget(t, db.URL, "b"); row.granted+row.leased+row.remaining+row.forfeited != 200 {
		t.Errorf("budget b: %+v; want its units to add up to 200", row)
	}
}

// Deleting LOCK (a tmp cleaner, a tidy operator) let a second daemon into
// the same directory, where the two overwrote each other's segments. The
// directory itself is locked now.
func TestSecondDaemonInTheSameDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	db, a, c := liveOriginal(t)
	granted := takeN(t, a.socket, "b", 20)
	os.Remove(filepath.Join(a.journal, "LOCK"))

	b := secondDaemon(t, db, a.journal)
	refused(t, b, "journal directory is in use by another process")
	pipeIncr(t, c, "k", 500)
	granted += takeAll(t, a.socket, "b")
	want := int64(1500)
	select {
	case <-b.exited:
	default:
		pipeIncr(t, client(t, b.socket), "k", 500)
		want += 500
		granted += takeAll(t, b.socket, "b")
		flush(t, b.socket)
		b.stop()
	}
	if granted > 200 {
		t.Errorf("%d units granted from a budget of 200", granted)
	}
	flush(t, a.socket)
	a.stop()
	// Every acknowledged INCR, once, and a restart finds a sound journal.
	a.restart()
	flush(t, a.socket)
	if got := total(t, db, "k"); got != want {
		t.Errorf("k = %d; want %d", got, want)
	}
	if row := readBudget(t, db.URL, "b"); row.granted > 200 || row.granted+row.leased+row.remaining+row.forfeited != 200 {
		t.Errorf("budget b: %+v; want at most 200 granted, adding up to 200", row)
	}
}

// A journal replayed its rounds into whichever database DATABASE_URL
// named (after make pg-destroy, or a changed URL). Now it is bound to
// its database, and refuses another while it holds rounds.
func TestJournalRefusesAnotherDatabase(t *testing.T) {
	t.Parallel()
	one := pgtest.New(t, pgtest.Options{})
	other := pgtest.New(t, pgtest.Options{})
	a := startDaemon(t, one, fenceEnv...)
	pipeIncr(t, client(t, a.socket), "k", 100)
	a.kill() // the increments are acknowledged and in the journal only

	b := secondDaemon(t, other, a.journal)
	refused(t, b, "journal belongs to another database")
	for _, want := range []string{one.Schema, other.Schema, ".orphaned"} {
		if !strings.Contains(b.log(), want) {
			t.Errorf("the refusal does not name %q:\n%s", want, b.log())
		}
	}
	if b.cmd.ProcessState != nil && b.cmd.ProcessState.Success() {
		t.Error("the refused daemon exited 0")
	}
	select {
	case <-b.exited:
	default:
		flush(t, b.socket)
		b.stop()
	}
	if got := total(t, other, "k"); got != 0 {
		t.Errorf("the other database counted k = %d; want 0", got)
	}
	a.restart()
	flush(t, a.socket)
	if got := total(t, one, "k"); got != 100 {
		t.Errorf("k = %d in the journal's own database; want 100", got)
	}
}

// A daemon whose instance another run took over commits nothing more: its
// next round is refused in PostgreSQL, it exits, and its rounds stay in
// its journal for whoever the operator decides should deliver them.
func TestTakenOverDaemonStops(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	a := startDaemon(t, db, fenceEnv...)
	pipeIncr(t, client(t, a.socket), "k", 100)
	// Another run claims the instance, as a copy does once a stale
	// original's lease runs out.
	if _, err := db.Pool.Exec(context.Background(), `UPDATE counterd_owners SET generation = 'another'`); err != nil {
		t.Fatal(err)
	}
	if err := client(t, a.socket).Do(context.Background(), "FLUSH").Err(); err == nil {
		t.Fatal("FLUSH succeeded after the instance was taken over")
	}
	<-a.exited
	if a.err == nil || !strings.Contains(a.log(), "taken over") {
		t.Fatalf("exit %v; want an error saying the instance was taken over\n%s", a.err, a.log())
	}
	if got := total(t, db, "k"); got != 0 {
		t.Fatalf("k = %d after the fence; want 0", got)
	}
	// The same directory on the same boot claims it back at once and
	// delivers what it acknowledged, once.
	a.restart()
	flush(t, a.socket)
	if got := total(t, db, "k"); got != 100 {
		t.Fatalf("k = %d after the restart; want 100", got)
	}
}
