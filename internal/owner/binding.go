package owner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrOtherDatabase is wrapped by Bind when the journal holds rounds for
// another database.
var ErrOtherDatabase = errors.New("journal belongs to another database")

// Binding names the database a journal's rounds belong to. Install decides;
// the rest is there for people reading the error.
type Binding struct {
	// Install is counterd_installation's id: one per migrated schema.
	Install string
	// System is the server's system identifier ("" if it could not be
	// read), Database and Schema where the installation lives.
	System, Database, Schema string
}

func (b Binding) String() string {
	return fmt.Sprintf("installation %s (server system identifier %s, database %q, schema %q)", b.Install, b.System, b.Database, b.Schema)
}

// marshal is the binding file's text: one name=value line each.
func (b Binding) marshal() []byte {
	return fmt.Appendf(nil, "install=%s\nsystem=%s\ndatabase=%s\nschema=%s\n", b.Install, b.System, b.Database, b.Schema)
}

func parseBinding(text []byte) (Binding, error) {
	var b Binding
	fields := map[string]*string{"install": &b.Install, "system": &b.System, "database": &b.Database, "schema": &b.Schema}
	sc := bufio.NewScanner(strings.NewReader(string(text)))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), "=")
		if p := fields[name]; ok && p != nil {
			*p = value
		}
	}
	if b.Install == "" {
		return b, fmt.Errorf("journal binding names no installation: %q", text)
	}
	return b, nil
}

// Current reads the binding of the database pool connects to.
func Current(ctx context.Context, pool *pgxpool.Pool) (Binding, error) {
	var b Binding
	err := pool.QueryRow(ctx, `SELECT id::text, current_database(), current_schema() FROM counterd_installation`).
		Scan(&b.Install, &b.Database, &b.Schema)
	if err != nil {
		return b, fmt.Errorf("read installation id: %w", err)
	}
	// Readable by anyone on a stock server; a locked-down one leaves it out.
	_ = pool.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&b.System)
	return b, nil
}

// Store is where a journal keeps its binding (journal.Journal).
type Store interface {
	Binding() ([]byte, error)
	SaveBinding([]byte) error
}

// Bind checks that the journal in st belongs to cur and records cur
// there. A journal bound to another installation is rebound when it
// holds nothing to replay (rounds is 0), and refused otherwise: replaying
// its rounds into a database they were not counted for would count them
// in the wrong place, and forget them in the right one.
func Bind(st Store, dir string, cur Binding, rounds int) (rebound *Binding, err error) {
	text, err := st.Binding()
	if err != nil {
		return nil, err
	}
	if text != nil {
		old, err := parseBinding(text)
		if err != nil {
			return nil, err
		}
		if old.Install == cur.Install {
			return nil, nil
		}
		if rounds > 0 {
			return nil, fmt.Errorf("%w: journal %s holds %d unflushed rounds for %s, but DATABASE_URL points at %s. "+
				"To deliver them, point DATABASE_URL back at that database. "+
				"To discard them, move the journal directory aside (mv %s %s.orphaned) and start again",
				ErrOtherDatabase, dir, rounds, old, cur, dir, dir)
		}
		rebound = &old
	}
	if err := st.SaveBinding(cur.marshal()); err != nil {
		return nil, err
	}
	return rebound, nil
}
