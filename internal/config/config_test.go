package config_test

import (
	"bytes"
	"errors"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/config"
)

func TestLoadCounterd(t *testing.T) {
	t.Parallel()
	f := func(env []string, wantVar string) {
		t.Helper()
		_, err := config.Load[config.Counterd](env)
		var cerr *config.Error
		switch {
		case wantVar == "" && err != nil:
			t.Fatalf("Load(%v): %v; want no error", env, err)
		case wantVar != "" && !errors.As(err, &cerr):
			t.Fatalf("Load(%v): %v; want a *config.Error for %s", env, err, wantVar)
		case wantVar != "" && cerr.Var != wantVar:
			t.Fatalf("Load(%v): error names %s; want %s", env, cerr.Var, wantVar)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Fatalf("error %q spans lines", err)
		}
	}
	db := "DATABASE_URL=postgres://x/y"
	f([]string{db}, "")
	f(nil, "DATABASE_URL")
	f([]string{"DATABASE_URL="}, "DATABASE_URL") // else pgx connects to libpq's defaults
	f([]string{db, "COUNTERD_FLUSH_INTERVAL=soon"}, "COUNTERD_FLUSH_INTERVAL")
	f([]string{db, "COUNTERD_FLUSH_INTERVAL=-1s"}, "COUNTERD_FLUSH_INTERVAL")
	f([]string{db, "COUNTERD_SLOTS=0"}, "COUNTERD_SLOTS")
	f([]string{db, "COUNTERD_SLOTS=many"}, "COUNTERD_SLOTS")
	f([]string{db, "COUNTERD_SOCKET_MODE=0999"}, "COUNTERD_SOCKET_MODE")
	f([]string{db, "COUNTERD_SOCKET_MODE=0660"}, "")
	f([]string{db, "COUNTERD_LOG_LEVEL=loud"}, "COUNTERD_LOG_LEVEL")
	f([]string{db, "COUNTERD_LOG_FORMAT=xml"}, "COUNTERD_LOG_FORMAT")
	f([]string{db, "COUNTERD_SOCKET=/" + strings.Repeat("a", 120)}, "COUNTERD_SOCKET")
	f([]string{db, "COUNTERD_MAX_CONNS=0"}, "COUNTERD_MAX_CONNS")
	f([]string{db, "COUNTERD_STATEMENT_TIMEOUT=0"}, "")
	f([]string{db, "COUNTERD_STATEMENT_TIMEOUT=-1s"}, "COUNTERD_STATEMENT_TIMEOUT")
	f([]string{db, "COUNTERD_LOCK_TIMEOUT=soon"}, "COUNTERD_LOCK_TIMEOUT")
	f([]string{db, "COUNTERD_LOCK_TIMEOUT=-5s"}, "COUNTERD_LOCK_TIMEOUT")
	f([]string{db, "COUNTERD_SAMPLE_KEYS=view:*,*:views"}, "")
	f([]string{db, "COUNTERD_SAMPLE_KEYS=view:*,"}, "COUNTERD_SAMPLE_KEYS")
	f([]string{db, "COUNTERD_LOOPS=-1"}, "COUNTERD_LOOPS")
	f([]string{db, "COUNTERD_LOOPS=257"}, "COUNTERD_LOOPS")
	f([]string{db, "COUNTERD_LOOPS=4"}, "")
	f([]string{db, "COUNTERD_IO=goroutines"}, "")
	f([]string{db, "COUNTERD_IO=threads"}, "COUNTERD_IO")
	if config.EventLoops {
		f([]string{db, "COUNTERD_IO=loop"}, "")
	} else {
		f([]string{db, "COUNTERD_IO=loop"}, "COUNTERD_IO") // no epoll: refused, not served otherwise
	}
}

// COUNTERD_IO defaults to the event loops where the system has them
// (Linux), else to a goroutine per connection, set or empty alike.
func TestIODefault(t *testing.T) {
	t.Parallel()
	want := "goroutines"
	if config.EventLoops {
		want = "loop"
	}
	for _, env := range [][]string{nil, {"COUNTERD_IO="}} {
		c, err := config.Load[config.Counterd](append([]string{"DATABASE_URL=postgres://x/y"}, env...))
		if err != nil {
			t.Fatal(err)
		}
		if c.IO != want {
			t.Fatalf("env %v: COUNTERD_IO %q; want %q", env, c.IO, want)
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Load[config.Counterd]([]string{"DATABASE_URL=postgres://x/y"})
	if err != nil {
		t.Fatal(err)
	}
	if c.SocketMode != 0o600 || c.FlushInterval != 100*time.Millisecond || !strings.HasPrefix(c.MetricsAddr, "127.0.0.1:") {
		t.Fatalf("defaults: mode %o, interval %v, metrics %q", c.SocketMode, c.FlushInterval, c.MetricsAddr)
	}
	if c.StatementTimeout != 30*time.Second || c.LockTimeout != 5*time.Second {
		t.Fatalf("defaults: statement timeout %v, lock timeout %v; want 30s, 5s", c.StatementTimeout, c.LockTimeout)
	}
	r, err := config.Load[config.Rollup]([]string{"DATABASE_URL=postgres://x/y"})
	if err != nil {
		t.Fatal(err)
	}
	if r.StatementTimeout != 30*time.Second || r.LockTimeout != 5*time.Second || r.MaxPass >= r.Timeout {
		t.Fatalf("rollup defaults: statement timeout %v, lock timeout %v, max pass %v (timeout %v)", r.StatementTimeout, r.LockTimeout, r.MaxPass, r.Timeout)
	}
}

// An empty variable means its default to env, so metrics are turned off
// by name.
func TestMetricsOff(t *testing.T) {
	t.Parallel()
	f := func(value, want string) {
		t.Helper()
		c, err := config.Load[config.Counterd]([]string{"DATABASE_URL=postgres://x/y", "COUNTERD_METRICS_ADDR=" + value})
		if err != nil {
			t.Fatal(err)
		}
		if c.MetricsAddr != want {
			t.Fatalf("COUNTERD_METRICS_ADDR=%q: got %q; want %q", value, c.MetricsAddr, want)
		}
	}
	f("off", config.MetricsOff)
	f("", "127.0.0.1:9464")
}

func TestLoadRollup(t *testing.T) {
	t.Parallel()
	f := func(sched, wantVar string) {
		t.Helper()
		_, err := config.Load[config.Rollup]([]string{"DATABASE_URL=postgres://x/y", "ROLLUP_SCHEDULE=" + sched})
		var cerr *config.Error
		if wantVar == "" {
			if err != nil {
				t.Fatalf("schedule %q: %v; want ok", sched, err)
			}
			return
		}
		if !errors.As(err, &cerr) || cerr.Var != wantVar {
			t.Fatalf("schedule %q: %v; want error naming %s", sched, err, wantVar)
		}
	}
	f("@every 10s", "")
	f("@every 1h30m", "")
	f("@hourly", "")
	f("*/5 * * * *", "")
	f("every so often", "ROLLUP_SCHEDULE")
	// cron runs these every second, or every 1s for 1.5s, without a word;
	// before, they were accepted.
	f("@every 0s", "ROLLUP_SCHEDULE")
	f("@every -1s", "ROLLUP_SCHEDULE")
	f("@every 100ms", "ROLLUP_SCHEDULE")
	f("@every 1500ms", "ROLLUP_SCHEDULE")
	f("@every often", "ROLLUP_SCHEDULE")
	// A word cron does not know says what it takes instead.
	_, err := config.Load[config.Rollup]([]string{"DATABASE_URL=postgres://x/y", "ROLLUP_SCHEDULE=hourly"})
	if err == nil || !strings.Contains(err.Error(), "@hourly") {
		t.Errorf("schedule hourly: %v; want an error suggesting @hourly", err)
	}
}

func TestLoadRollupLimits(t *testing.T) {
	t.Parallel()
	f := func(env []string, wantVar string) {
		t.Helper()
		_, err := config.Load[config.Rollup](append([]string{"DATABASE_URL=postgres://x/y"}, env...))
		var cerr *config.Error
		switch {
		case wantVar == "" && err != nil:
			t.Fatalf("Load(%v): %v; want no error", env, err)
		case wantVar != "" && (!errors.As(err, &cerr) || cerr.Var != wantVar):
			t.Fatalf("Load(%v): %v; want an error naming %s", env, err, wantVar)
		}
	}
	f(nil, "")
	f([]string{"ROLLUP_MAX_PASS=4m"}, "")
	f([]string{"ROLLUP_MAX_PASS=5m"}, "ROLLUP_MAX_PASS") // not less than ROLLUP_TIMEOUT
	f([]string{"ROLLUP_MAX_PASS=10m", "ROLLUP_TIMEOUT=11m"}, "")
	f([]string{"ROLLUP_MAX_PASS=0"}, "ROLLUP_MAX_PASS")
	f([]string{"ROLLUP_MAX_PASS=soon"}, "ROLLUP_MAX_PASS")
	f([]string{"ROLLUP_STATEMENT_TIMEOUT=0", "ROLLUP_LOCK_TIMEOUT=0"}, "")
	f([]string{"ROLLUP_STATEMENT_TIMEOUT=-1s"}, "ROLLUP_STATEMENT_TIMEOUT")
	f([]string{"ROLLUP_LOCK_TIMEOUT=later"}, "ROLLUP_LOCK_TIMEOUT")
}

func TestUsageListsEveryVariable(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	config.Usage[config.Counterd](&b)
	for _, v := range []string{"DATABASE_URL", "COUNTERD_SOCKET", "COUNTERD_METRICS_ADDR", "COUNTERD_FLUSH_INTERVAL", "(required)", "127.0.0.1:9464", "COUNTERD_MAX_CONNS", config.SocketRule} {
		if !strings.Contains(b.String(), v) {
			t.Errorf("usage lacks %q:\n%s", v, b.String())
		}
	}
}

func TestDefaultSocket(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  map[string]string
		uid  int
		want string
	}{
		{map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, 1000, "/run/user/1000/counterd/counterd.sock"},
		{map[string]string{"XDG_RUNTIME_DIR": "/run/user/0"}, 0, "/run/user/0/counterd/counterd.sock"},
		{map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "TMPDIR": "/var/tmp"}, 1000, "/run/user/1000/counterd/counterd.sock"},
		{nil, 0, "/run/counterd/counterd.sock"},
		{map[string]string{"TMPDIR": "/var/tmp"}, 0, "/run/counterd/counterd.sock"},
		{nil, 1000, "/tmp/counterd-1000/counterd.sock"},
		{map[string]string{"TMPDIR": "/var/tmp/"}, 1000, "/var/tmp/counterd-1000/counterd.sock"},
		{map[string]string{"XDG_RUNTIME_DIR": "", "TMPDIR": ""}, 42, "/tmp/counterd-42/counterd.sock"},
		// Relative values are not trusted (the XDG spec requires absolute).
		{map[string]string{"XDG_RUNTIME_DIR": "run", "TMPDIR": "tmp"}, 42, "/tmp/counterd-42/counterd.sock"},
	}
	for _, tt := range tests {
		if got := config.DefaultSocket(tt.env, tt.uid); got != tt.want {
			t.Errorf("DefaultSocket(%v, %d): got %q; want %q", tt.env, tt.uid, got, tt.want)
		}
	}
}

// COUNTERD_SOCKET overrides the rule; empty or unset means the rule.
func TestSocketResolved(t *testing.T) {
	t.Parallel()
	f := func(env []string, want string) {
		t.Helper()
		c, err := config.Load[config.Counterd](append([]string{"DATABASE_URL=postgres://x/y"}, env...))
		if err != nil {
			t.Fatal(err)
		}
		if c.Socket != want {
			t.Fatalf("env %v: socket %q; want %q", env, c.Socket, want)
		}
	}
	f([]string{"XDG_RUNTIME_DIR=/run/user/7"}, "/run/user/7/counterd/counterd.sock")
	f([]string{"XDG_RUNTIME_DIR=/run/user/7", "COUNTERD_SOCKET="}, "/run/user/7/counterd/counterd.sock")
	f([]string{"XDG_RUNTIME_DIR=/run/user/7", "COUNTERD_SOCKET=/srv/c.sock"}, "/srv/c.sock")
	f([]string{"XDG_RUNTIME_DIR=/" + strings.Repeat("r", 20)}, "/"+strings.Repeat("r", 20)+"/counterd/counterd.sock")
	_, err := config.Load[config.Counterd]([]string{"DATABASE_URL=postgres://x/y", "XDG_RUNTIME_DIR=/" + strings.Repeat("r", 100)})
	var cerr *config.Error
	if !errors.As(err, &cerr) || cerr.Var != "COUNTERD_SOCKET" {
		t.Fatalf("a resolved path too long: got %v; want an error naming COUNTERD_SOCKET", err)
	}
	// Errors about a socket picked by the rule say so, and from what:
	// before, a missing XDG_RUNTIME_DIR was reported as COUNTERD_SOCKET's
	// fault, a variable the user never set.
	c, err := config.Load[config.Counterd]([]string{"DATABASE_URL=postgres://x/y", "XDG_RUNTIME_DIR=/run/user/7"})
	if err != nil || !strings.Contains(c.SocketSource, "unset") || !strings.Contains(c.SocketSource, "XDG_RUNTIME_DIR=/run/user/7") {
		t.Errorf("SocketSource by rule: %q, %v; want it to name XDG_RUNTIME_DIR", c.SocketSource, err)
	}
	c, err = config.Load[config.Counterd]([]string{"DATABASE_URL=postgres://x/y", "COUNTERD_SOCKET=/srv/c.sock"})
	if err != nil || c.SocketSource != "" {
		t.Errorf("SocketSource when set: %q, %v; want empty (COUNTERD_SOCKET itself)", c.SocketSource, err)
	}
}

// A value that does not parse is named with its variable, the value and
// what the variable takes, never a Go type: every setting of a type other
// than string is tried. Before, errors said "invalid journal.FsyncMode".
func TestInvalidValueErrorsNameNoGoType(t *testing.T) {
	t.Parallel()
	f := func(name string, typ reflect.Type, load func([]string) error) {
		t.Helper()
		const bad = "§bad"
		err := load([]string{"DATABASE_URL=postgres://x/y", name + "=" + bad})
		var cerr *config.Error
		if !errors.As(err, &cerr) || cerr.Var != name {
			t.Errorf("%s=%s: got %v; want a *config.Error naming %s", name, bad, err, name)
			return
		}
		msg := err.Error()
		if !strings.Contains(msg, `"`+bad+`"`) || !strings.Contains(msg, "; want ") || strings.Contains(msg, "a valid value") {
			t.Errorf("%s=%s: got %q; want the value quoted and what %s takes", name, bad, msg, name)
		}
		goType := regexp.MustCompile(`\b(` + regexp.QuoteMeta(typ.String()) + `|` + typ.Kind().String() + `)\b|journal\.|slog\.|config\.|time\.`)
		if m := goType.FindString(msg); m != "" {
			t.Errorf("%s=%s: got %q; names the Go type (%s)", name, bad, msg, m)
		}
	}
	each := func(typ reflect.Type, load func([]string) error) {
		for i := range typ.NumField() {
			field := typ.Field(i)
			name, _, _ := strings.Cut(field.Tag.Get("env"), ",")
			if name == "" || field.Type.Kind() == reflect.String {
				continue
			}
			f(name, field.Type, load)
		}
	}
	each(reflect.TypeFor[config.Counterd](), func(env []string) error { _, err := config.Load[config.Counterd](env); return err })
	each(reflect.TypeFor[config.Rollup](), func(env []string) error { _, err := config.Load[config.Rollup](env); return err })

	// The messages themselves, for the types an operator meets most.
	g := func(kv, want string) {
		t.Helper()
		_, err := config.Load[config.Counterd]([]string{"DATABASE_URL=postgres://x/y", kv})
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v; want %q", kv, err, want)
		}
	}
	g("COUNTERD_FSYNC=sometimes", `COUNTERD_FSYNC: invalid value "sometimes"; want always, everysec or no`)
	g("COUNTERD_LOG_LEVEL=loud", `COUNTERD_LOG_LEVEL: invalid value "loud"; want debug, info, warn or error`)
	g("COUNTERD_SOCKET_MODE=0999", `COUNTERD_SOCKET_MODE: invalid value "0999"; want an octal permission mode such as 0600`)
	g("COUNTERD_FLUSH_INTERVAL=soon", `COUNTERD_FLUSH_INTERVAL: invalid value "soon"; want a duration such as 250ms, 30s, 5m or 1h30m`)
	g("COUNTERD_SLOTS=many", `COUNTERD_SLOTS: invalid value "many"; want an integer`)
}

// A removed variable still set is warned about once at start, naming it
// and what replaces it; one not set says nothing. Before, it was ignored
// without a word.
func TestWarnRemoved(t *testing.T) {
	t.Parallel()
	f := func(environ []string, want int) {
		t.Helper()
		var b bytes.Buffer
		config.WarnRemoved(slog.New(slog.NewTextHandler(&b, nil)), environ)
		if got := strings.Count(b.String(), "level=WARN"); got != want {
			t.Fatalf("WarnRemoved(%q): %d warnings; want %d:\n%s", environ, got, want, b.String())
		}
		if want > 0 && (!strings.Contains(b.String(), "COUNTERD_HOT_STRATEGY") || !strings.Contains(b.String(), "COUNTERD_SAMPLE_KEYS")) {
			t.Fatalf("WarnRemoved: %q; want it to name COUNTERD_HOT_STRATEGY and COUNTERD_SAMPLE_KEYS", b.String())
		}
	}
	f([]string{"COUNTERD_HOT_STRATEGY=exact", "COUNTERD_SLOTS=4"}, 1)
	f([]string{"COUNTERD_SLOTS=4"}, 0)
}

// ROLLUP_SET_RECONCILE needs its keys, and its keys need it; it is
// refused with a cluster, and with a tombstone slack a reconcile could
// outlive.
func TestLoadRollupSetReconcile(t *testing.T) {
	t.Parallel()
	f := func(env []string, wantVar string) {
		t.Helper()
		_, err := config.Load[config.Rollup](append([]string{"DATABASE_URL=postgres://x/y"}, env...))
		var cerr *config.Error
		switch {
		case wantVar == "" && err != nil:
			t.Fatalf("Load(%v): %v; want no error", env, err)
		case wantVar != "" && (!errors.As(err, &cerr) || cerr.Var != wantVar):
			t.Fatalf("Load(%v): %v; want an error naming %s", env, err, wantVar)
		}
	}
	const q, k = "ROLLUP_SET_RECONCILE=SELECT 'post:' || post_id || ':likes', user_id::text::bytea FROM likes", "ROLLUP_SET_RECONCILE_KEYS=post:*:likes"
	f([]string{q, k}, "")
	f([]string{q}, "ROLLUP_SET_RECONCILE")
	f([]string{k}, "ROLLUP_SET_RECONCILE_KEYS")
	f([]string{q, "ROLLUP_SET_RECONCILE_KEYS=post:*,"}, "ROLLUP_SET_RECONCILE_KEYS")
	f([]string{q, k, "ROLLUP_CLUSTER=c"}, "ROLLUP_SET_RECONCILE")
	f([]string{q, k, "ROLLUP_SET_TOMBSTONE_SLACK=5m"}, "ROLLUP_SET_TOMBSTONE_SLACK") // < 1m + 5m
	f([]string{q, k, "ROLLUP_SET_TOMBSTONE_SLACK=6m"}, "")
	f([]string{"ROLLUP_SET_TOMBSTONE_SLACK=1s"}, "") // no reconcile: any slack
	f([]string{"ROLLUP_SET_TOMBSTONE_SLACK=-1s"}, "ROLLUP_SET_TOMBSTONE_SLACK")
	f([]string{q, k, "ROLLUP_SET_RECONCILE_MARGIN=-1s"}, "ROLLUP_SET_RECONCILE_MARGIN")
	f([]string{q, k, "ROLLUP_SET_RECONCILE_EVERY=0"}, "")
}
