package owner_test

import (
	"context"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/owner"
	"github.com/counterd/counterd/internal/pgtest"
)

// TestHeartbeatCountsTheFleet: each heartbeat counts the live daemons on
// the database, itself included; a released instance and one whose
// owner stopped heartbeating a TTL ago are not counted.
func TestHeartbeatCountsTheFleet(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	const ttl = time.Hour
	claim := func(inst string) *owner.Owner {
		t.Helper()
		c := run("g-"+inst, inst)
		c.Instance = inst
		o, err := acquire(t, db, c, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	a, b, gone := claim("a"), claim("b"), claim("gone")
	claim("dead")
	if err := gone.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(context.Background(), `UPDATE counterd_owners SET heartbeat_at = now() - interval '2 hours' WHERE instance = 'dead'`); err != nil {
		t.Fatal(err)
	}
	counts := make(chan int, 16)
	a.OnFleet(func(n int) { counts <- n })
	heartbeat(t, a) // counts at once, then every TTL/3
	select {
	case n := <-counts:
		if n != 2 {
			t.Errorf("fleet counted %d; want 2 (a and b: gone released, dead stopped an hour past the TTL)", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no fleet count from the first heartbeat")
	}
	_ = b
}
