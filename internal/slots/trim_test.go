package slots_test

import (
	"context"
	"testing"

	"github.com/counterd/counterd/internal/change"
)

// Trim closes idle connections, and the store writes on new ones.
func TestTrim(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := context.Background()
	if _, err := s.Apply(ctx, []change.Change{{Key: "a", Kind: change.Total, Delta: 1}}); err != nil {
		t.Fatal(err)
	}
	if idle := db.Pool.Stat().IdleConns(); idle == 0 {
		t.Fatal("no idle connection after a write; the test needs one")
	}
	s.Trim(ctx)
	if idle := db.Pool.Stat().IdleConns(); idle != 0 {
		t.Fatalf("%d idle connections after Trim; want 0", idle)
	}
	if _, err := s.Apply(ctx, []change.Change{{Key: "a", Kind: change.Total, Delta: 2}}); err != nil {
		t.Fatal(err)
	}
	if got := total(t, db, "a"); got != 3 {
		t.Fatalf("a = %d; want 3", got)
	}
}
