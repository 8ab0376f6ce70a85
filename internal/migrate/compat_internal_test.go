package migrate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
)

func TestCompatibleWithLine(t *testing.T) {
	t.Parallel()
	f := func(up string, want int, wantErr string) {
		t.Helper()
		got, err := compatibleWith(20, up)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%q: err %v; want one saying %q", up, err, wantErr)
			}
			return
		}
		if err != nil || got != want {
			t.Errorf("%q: got %d, %v; want %d", up, got, err, want)
		}
	}
	f("CREATE TABLE t ();", 20, "")
	f("-- 020_x: a change\n--\n-- compatible-with: 19\nCREATE TABLE t ();", 19, "")
	f("--compatible-with:17\t\n", 17, "")
	f("-- compatible-with: 20\n", 20, "")
	f("  -- compatible-with: 3\n", 20, "") // not a line of its own: no declaration
	f("-- compatible-with: 21\n", 0, "from 1 to 20")
	f("-- compatible-with: 0\n", 0, "from 1 to 20")
	f("-- compatible-with: nineteen\n", 0, "from 1 to 20")
	f("-- compatible-with:\n", 0, "from 1 to 20")
	f("-- compatible-with: 18\n-- compatible-with: 19\n", 0, "2 compatible-with lines")
}

func TestLoadReadsTheDeclaration(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"001_a.up.sql":   {Data: []byte("SELECT 1;")},
		"001_a.down.sql": {Data: []byte("SELECT 1;")},
		"002_b.up.sql":   {Data: []byte("-- compatible-with: 1\nSELECT 1;")},
		"002_b.down.sql": {Data: []byte("-- compatible-with: 5\nSELECT 1;")}, // a down file declares nothing
	}
	migs, err := load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{migs[0].CompatibleWith, migs[1].CompatibleWith}; got[0] != 1 || got[1] != 1 {
		t.Fatalf("compatible with %v; want [1 1]", got)
	}
	fsys["002_b.up.sql"] = &fstest.MapFile{Data: []byte("-- compatible-with: 3\n")}
	if _, err := load(fsys); err == nil || !strings.Contains(err.Error(), "002_b.up.sql") {
		t.Fatalf("a declaration above the migration loaded: %v; want an error naming the file", err)
	}
}

// The embedded migrations' declarations are well formed, and the newest
// that has one is 020, which the previous release's daemons survive.
func TestEmbeddedDeclarations(t *testing.T) {
	t.Parallel()
	migs, err := All()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migs {
		if m.Version == 20 && m.CompatibleWith != 19 {
			t.Errorf("020_%s is compatible with %d; want 19 (the previous release runs against it)", m.Name, m.CompatibleWith)
		}
		if m.Version < 20 && m.CompatibleWith != m.Version {
			t.Errorf("%03d_%s declares compatible-with %d; migrations before 020 declare nothing", m.Version, m.Name, m.CompatibleWith)
		}
	}
}

func TestRefuse(t *testing.T) {
	t.Parallel()
	known := Migration{Version: 20, Name: "fleet"}
	c := func(n int) *int { return &n }
	f := func(newer []schemaRow, wantNeeds int) {
		t.Helper()
		err := refuse(known, newer)
		if wantNeeds == 0 {
			if err != nil {
				t.Errorf("%+v: %v; want no refusal", newer, err)
			}
			return
		}
		var e *TooNewError
		if !errors.As(err, &e) || !errors.Is(err, ErrTooNew) {
			t.Fatalf("%+v: %v; want a TooNewError", newer, err)
		}
		last := newer[len(newer)-1]
		if e.Needs != wantNeeds || e.Known != 20 || e.Schema != last.Version {
			t.Errorf("%+v: needs %d, known %d, schema %d; want %d, 20, %d", newer, e.Needs, e.Known, e.Schema, wantNeeds, last.Version)
		}
		msg := err.Error()
		for _, want := range []string{"up to 020_fleet", fmt.Sprintf("migration %03d_%s", last.Version, last.Name), "version " + e.Binary} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q does not say %q", msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("message %q is more than one line", msg)
		}
	}
	f(nil, 0)
	f([]schemaRow{{Version: 21, Name: "x", Compatible: c(20)}}, 0)
	f([]schemaRow{{Version: 21, Name: "x", Compatible: c(19)}, {Version: 22, Name: "y", Compatible: c(18)}}, 0)
	f([]schemaRow{{Version: 21, Name: "x", Compatible: c(21)}}, 21)
	f([]schemaRow{{Version: 21, Name: "x"}}, 21) // undeclared: only binaries that know it
	f([]schemaRow{{Version: 21, Name: "x", Compatible: c(20)}, {Version: 22, Name: "y", Compatible: c(22)}}, 22)
	f([]schemaRow{{Version: 21, Name: "x", Compatible: c(21)}, {Version: 22, Name: "y", Compatible: c(19)}}, 21)
}
