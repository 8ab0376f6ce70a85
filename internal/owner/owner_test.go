package owner_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/owner"
	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/slots"
	"github.com/counterd/counterd/internal/store"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// run is a Claim for instance "i" by a run of generation gen in directory
// dir on one host and boot.
func run(gen, dir string) owner.Claim {
	return owner.Claim{Instance: "i", Generation: gen, Dir: "/j/" + dir, DirID: dir, Host: "h", BootID: "b", PID: 1}
}

func acquire(t *testing.T, db *pgtest.DB, c owner.Claim, ttl time.Duration) (*owner.Owner, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return owner.Acquire(ctx, db.Pool, c, ttl, discard)
}

// heartbeat runs o's heartbeat until the test ends and returns its error.
func heartbeat(t *testing.T, o *owner.Owner) <-chan error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return done
}

func TestAcquireRefusesACopyOfALiveDaemon(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	const ttl = 900 * time.Millisecond
	orig, err := acquire(t, db, run("g1", "d1"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	heartbeat(t, orig)
	// The copy has another directory, and the original keeps heartbeating.
	_, err = acquire(t, db, run("g2", "d2"), ttl)
	var inUse *owner.InUseError
	if !errors.As(err, &inUse) || !errors.Is(err, owner.ErrInUse) {
		t.Fatalf("got %v; want an InUseError", err)
	}
	if !strings.Contains(err.Error(), "/j/d1") {
		t.Errorf("error %q does not name the owner's journal", err)
	}
	// A restart in place on the same boot (it holds the directory's lock,
	// so the original is gone) claims at once, whatever the heartbeat.
	start := time.Now()
	if _, err := acquire(t, db, run("g3", "d1"), time.Hour); err != nil {
		t.Fatalf("restart in place: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("restart in place took %v; it must not wait for the lease", d)
	}
}

func TestTakeoverFencesTheOldOwner(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	const ttl = 600 * time.Millisecond
	ctx := context.Background()
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	old, err := acquire(t, db, run("g1", "d1"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	mine := store.BatchID{Identity: store.Identity{Instance: "i", Generation: "g1"}, Seq: 1}
	one := change.Change{Key: "k", Kind: change.Total, Delta: 1}
	if _, err := st.ApplyOnce(ctx, mine, []change.Change{one}); err != nil {
		t.Fatalf("the owner's own round: %v", err)
	}
	// The old owner stops heartbeating (it is cut off); another directory
	// takes over once the lease runs out, adopting nothing of g1.
	next, err := acquire(t, db, run("g2", "d2"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Elsewhere() {
		t.Error("Elsewhere() = false after taking over from a stale owner in another directory")
	}
	mine.Seq = 2
	_, err = st.ApplyOnce(ctx, mine, []change.Change{one})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old owner's round after the takeover: got %v; want ErrFenced", err)
	}
	theirs := store.BatchID{Identity: store.Identity{Instance: "i", Generation: "g2"}, Seq: 1}
	if _, err := st.ApplyOnce(ctx, theirs, []change.Change{one}); err != nil {
		t.Fatalf("the new owner's round: %v", err)
	}
	if got := total(t, db, "k"); got != 2 {
		t.Errorf("total = %d; want 2 (the fenced round wrote nothing)", got)
	}
	// The old owner's heartbeat now reports the fence.
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := old.Run(ctx2); !errors.Is(err, owner.ErrFenced) {
		t.Fatalf("old owner's heartbeat: got %v; want ErrFenced", err)
	}
}

func TestAdoptedGenerationsAreWritable(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	c := run("g2", "d1")
	c.Adopted = []string{"g1"}
	if _, err := acquire(t, db, c, time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	one := []change.Change{{Key: "k", Kind: change.Total, Delta: 1}}
	for _, gen := range []string{"g1", "g2", ""} {
		id := store.BatchID{Identity: store.Identity{Instance: "i", Generation: gen}, Seq: 1}
		if _, err := st.ApplyOnce(ctx, id, one); err != nil {
			t.Errorf("generation %q: %v", gen, err)
		}
	}
	id := store.BatchID{Identity: store.Identity{Instance: "i", Generation: "g0"}, Seq: 1}
	if _, err := st.ApplyOnce(ctx, id, one); !errors.Is(err, store.ErrFenced) {
		t.Errorf("generation g0, neither the owner's nor adopted: got %v; want ErrFenced", err)
	}
}

func TestReleasedInstanceIsClaimedAtOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	o, err := acquire(t, db, run("g1", "d1"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	next, err := acquire(t, db, run("g2", "d2"), time.Hour)
	if err != nil {
		t.Fatalf("claim after a release: %v", err)
	}
	if next.Elsewhere() {
		t.Error("Elsewhere() = true after a clean release")
	}
}

func total(t *testing.T, db *pgtest.DB, key string) int64 {
	t.Helper()
	var n int64
	err := db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(count), 0)::bigint FROM counter_slots WHERE key = $1`, key).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPruneRemovesIdleClaims(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	if _, err := acquire(t, db, run("g1", "d1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	st, err := slots.New(db.Pool, slots.Options{Kinds: catalog.Writers()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	count := func() (n int) {
		t.Helper()
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM counterd_owners`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := st.PruneInstances(ctx, time.Now().Add(-time.Hour)); err != nil || count() != 1 {
		t.Fatalf("prune before the heartbeat: %v; %d claims left, want 1", err, count())
	}
	if _, err := st.PruneInstances(ctx, time.Now().Add(time.Hour)); err != nil || count() != 0 {
		t.Fatalf("prune after the heartbeat: %v; %d claims left, want 0", err, count())
	}
}
