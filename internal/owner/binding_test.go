package owner_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/owner"
	"github.com/counterd/counterd/internal/pgtest"
)

// file is a binding Store in memory.
type file struct{ b []byte }

func (f *file) Binding() ([]byte, error)   { return f.b, nil }
func (f *file) SaveBinding(b []byte) error { f.b = b; return nil }

func TestBindRefusesAnotherDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := pgtest.New(t, pgtest.Options{})
	b := pgtest.New(t, pgtest.Options{})
	curA, err := owner.Current(ctx, a.Pool)
	if err != nil {
		t.Fatal(err)
	}
	curB, err := owner.Current(ctx, b.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if curA.Install == curB.Install {
		t.Fatalf("two schemas share installation %s", curA.Install)
	}
	f := &file{}
	if _, err := owner.Bind(f, "/j", curA, 3); err != nil {
		t.Fatalf("first bind: %v", err)
	}
	if _, err := owner.Bind(f, "/j", curA, 3); err != nil {
		t.Fatalf("bind to the same database: %v", err)
	}
	_, err = owner.Bind(f, "/j", curB, 3)
	if !errors.Is(err, owner.ErrOtherDatabase) {
		t.Fatalf("bind with rounds to another database: got %v; want ErrOtherDatabase", err)
	}
	for _, want := range []string{curA.Install, curB.Install, curA.Schema, curB.Schema, "mv /j /j.orphaned"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// With nothing to replay the journal follows the database.
	was, err := owner.Bind(f, "/j", curB, 0)
	if err != nil || was == nil || was.Install != curA.Install {
		t.Fatalf("rebind without rounds: got %v, %v; want the old binding", was, err)
	}
	if _, err := owner.Bind(f, "/j", curB, 3); err != nil {
		t.Fatalf("bound to the new database: %v", err)
	}
}
