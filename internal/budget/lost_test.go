package budget

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pgtest"
)

// replies holds back what PostgreSQL sends while held: the bytes are read
// off the socket (whenever pgx's read began) and dropped, and the read
// waits until the test cuts it, then fails as a broken connection would.
// The statement itself runs and commits in PostgreSQL; only its reply is
// lost.
type replies struct {
	held atomic.Bool
	cut  chan struct{}
}

type holdConn struct {
	net.Conn
	r *replies
}

var errCut = errors.New("connection cut by the test")

func (c *holdConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.r.held.Load() {
		<-c.r.cut
		return 0, errCut
	}
	return n, err
}

// A lease whose reply was lost (PostgreSQL committed it, the daemon's
// statement gave up first) is found by its request and returned whole,
// so its units are sold again while the daemon runs. Before, the holder
// renewed the orphan with its other leases until it stopped, and a budget
// of 20,000 stayed short by that lease on a loaded machine.
func TestLeaseWithLostReplyIsReturned(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()

	r := &replies{cut: make(chan struct{})}
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	// One round trip per statement, so holding a reply holds the lease's
	// result and not a prepare before it.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &holdConn{Conn: c, r: r}, nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	st := NewStore(pool)
	m := New(st, Options{
		Holder: "h1",
		// Long enough that no renewal shares the one connection while
		// the lease's reply is held.
		TTL:      time.Hour,
		Interval: 20 * time.Millisecond,
		Record: func(change.Change) (func(context.Context) error, error) {
			return nil, errors.New("no grant is expected from a lease whose reply was lost")
		},
		Replayed: func(context.Context) error { return nil },
	})
	running(t, m)
	if _, err := NewStore(db.Pool).Add(ctx, "gift", 1000); err != nil {
		t.Fatal(err)
	}

	// TAKE needs a lease; its reply is held until the lease is in the
	// table, then the connection breaks: the reply is lost.
	r.held.Store(true)
	taken := make(chan error, 1)
	go func() {
		_, err := m.Take(ctx, "gift", 1)
		taken <- err
	}()
	waitFor(t, "the lease to be committed", func() bool {
		var n int
		err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM budget_leases WHERE holder = 'h1'`).Scan(&n)
		return err == nil && n == 1
	})
	close(r.cut)
	if err := <-taken; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("TAKE whose lease reply was lost: %v; want ErrUnavailable", err)
	}
	r.held.Store(false)

	waitFor(t, "the lost lease to be returned", func() bool {
		tot, err := NewStore(db.Pool).Read(ctx, "gift")
		return err == nil && tot == (Totals{Remaining: 1000, Total: 1000})
	})
	checkInvariant(t, db)
}

// running runs m until the test ends and returns once it is ready.
func running(t *testing.T, m *Manager) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	waitFor(t, "the manager to recover its leases", m.Ready)
}

// waitFor polls cond for up to a minute (a loaded machine is slow; the
// condition, not the time, decides).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A lease attempt that failed before its statement was sent (the
// database refusing connections: an outage, a partition down) took
// nothing, so it is not remembered as a lease whose reply may be lost: a
// partition down for 30 s under TAKE load made thousands such attempts,
// which pushed a lease whose reply was really lost out of the bounded
// list (maxLost) before the outage ended, and its units stayed leased,
// renewed with the holder's others, while the daemon ran.
func TestLostLeaseSurvivesRefusedConnections(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()

	r := &replies{cut: make(chan struct{})}
	var refuse atomic.Bool
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if refuse.Load() {
			return nil, errors.New("connection refused by the test")
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &holdConn{Conn: c, r: r}, nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	m := New(NewStore(pool), Options{
		Holder:   "h1",
		TTL:      time.Hour,
		Interval: 20 * time.Millisecond,
		Record: func(change.Change) (func(context.Context) error, error) {
			return nil, errors.New("no grant is expected: every lease is lost or refused")
		},
		Replayed: func(context.Context) error { return nil },
	})
	running(t, m)
	if _, err := NewStore(db.Pool).Add(ctx, "gift", 1000); err != nil {
		t.Fatal(err)
	}

	r.held.Store(true)
	taken := make(chan error, 1)
	go func() {
		_, err := m.Take(ctx, "gift", 1)
		taken <- err
	}()
	waitFor(t, "the lease to be committed", func() bool {
		var n int
		err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM budget_leases WHERE holder = 'h1'`).Scan(&n)
		return err == nil && n == 1
	})
	// The connection breaks and the database refuses new ones: every
	// TAKE until it is back fails before sending anything.
	refuse.Store(true)
	close(r.cut)
	if err := <-taken; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("TAKE whose lease reply was lost: %v; want ErrUnavailable", err)
	}
	r.held.Store(false)
	for i := range 2 * maxLost {
		if _, err := m.Take(ctx, "gift", 1); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("TAKE %d while connections are refused: %v; want ErrUnavailable", i, err)
		}
	}
	refuse.Store(false)

	waitFor(t, "the lost lease to be returned", func() bool {
		tot, err := NewStore(db.Pool).Read(ctx, "gift")
		return err == nil && tot == (Totals{Remaining: 1000, Total: 1000})
	})
	checkInvariant(t, db)
}
