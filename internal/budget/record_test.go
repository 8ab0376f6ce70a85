package budget

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/counterd/counterd/internal/pgtest"
)

// RecordGrants records only the grants of lanes its transaction advanced
// (wrote the watermark row of), so a round replayed in a lane already
// recorded grants nothing twice; without lanes it records every grant.
func TestRecordGrantsOnlyInAdvancedLanes(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	st := NewStore(db.Pool)
	ctx := context.Background()
	if _, err := st.Add(ctx, "b", 100); err != nil {
		t.Fatal(err)
	}
	// A round holds one grant per lease (changes are unique per ID).
	var leases [2]int64
	for i := range leases {
		id, size, err := st.Lease(ctx, "b", "h", 0, 10, 1, time.Minute)
		if err != nil || size != 10 {
			t.Fatalf("lease: %d, %v; want 10", size, err)
		}
		leases[i] = id
	}
	// Lane h/1 recorded the round earlier; this transaction advances h/0.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counterd_instances (instance, last_seq) VALUES ('h/1', 7)`); err != nil {
		t.Fatal(err)
	}
	record := func(lanes []string, g Grants) (due, found int) {
		t.Helper()
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO counterd_instances (instance, last_seq) VALUES ('h/0', 7)
ON CONFLICT (instance) DO UPDATE SET last_seq = 7`); err != nil {
				return err
			}
			var err error
			due, found, err = RecordGrants(ctx, tx, lanes, g)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return due, found
	}
	two := Grants{Leases: leases[:], Units: []int64{3, 5}, Lanes: []int16{1, 2}}
	if due, found := record([]string{"h/0", "h/1"}, two); due != 1 || found != 1 {
		t.Errorf("grants due, found: %d, %d; want 1, 1 (lane h/1 was not advanced)", due, found)
	}
	if got := totals(t, st, "b"); got.Granted != 3 || got.Leased != 17 {
		t.Errorf("after lane h/0's grant: %+v; want granted 3, leased 17", got)
	}
	if due, found := record(nil, two); due != 2 || found != 2 {
		t.Errorf("without lanes, grants due, found: %d, %d; want 2, 2", due, found)
	}
	if got := totals(t, st, "b"); got.Granted != 11 || got.Leased != 9 {
		t.Errorf("after every grant: %+v; want granted 11, leased 9", got)
	}
	checkInvariant(t, db)
}
