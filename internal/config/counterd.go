package config

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/counterd/counterd/internal/glob"
	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/retention"
	"github.com/counterd/counterd/internal/windows"
)

// MetricsOff is the COUNTERD_METRICS_ADDR that serves no metrics.
const MetricsOff = "off"

// Counterd is the daemon's configuration.
type Counterd struct {
	DatabaseURL string `env:"DATABASE_URL,required,notEmpty" help:"PostgreSQL connection URL, postgres:// or postgresql:// (another scheme is refused), or keyword/value settings naming host or dbname; never logged"`
	// SocketSource names where Socket came from, for errors about it:
	// COUNTERD_SOCKET, or the rule that picked it when it was unset.
	SocketSource string
	// No static default: see SocketRule, resolved by Load.
	Socket string `env:"COUNTERD_SOCKET" defaultDoc:"(by rule)" help:"Unix socket to listen on, in a directory counterd's user owns and only it can write (not a symbolic link another user owns); default $XDG_RUNTIME_DIR/counterd/counterd.sock if XDG_RUNTIME_DIR is set, else /run/counterd/counterd.sock as root, else ${TMPDIR:-/tmp}/counterd-<uid>/counterd.sock"`
	// 0600 because anyone who can write the socket can change counts.
	SocketMode Mode `env:"COUNTERD_SOCKET_MODE" envDefault:"0600" help:"permission bits of the socket, octal"`
	// "off" rather than empty, because env takes the default for an
	// empty variable.
	MetricsAddr string `env:"COUNTERD_METRICS_ADDR" envDefault:"127.0.0.1:9464" help:"HTTP address for /metrics, /healthz, /readyz, /acceptingz (off disables)"`
	Pprof       bool   `env:"COUNTERD_PPROF" envDefault:"false" help:"also serve Go's /debug/pprof profiles on the metrics address"`

	// Relative by default so a laptop run needs no setup; production
	// should name a persistent absolute path (not /tmp).
	Journal         bool              `env:"COUNTERD_JOURNAL" envDefault:"true" help:"journal increments before acknowledging them; false is unsafe (a crash loses unflushed increments), for comparison only"`
	JournalDir      string            `env:"COUNTERD_JOURNAL_DIR" envDefault:"counterd-journal" help:"write-ahead journal directory (use a persistent absolute path), owned by counterd's user and writable by it alone; created 0700 when missing"`
	Fsync           journal.FsyncMode `env:"COUNTERD_FSYNC" envDefault:"everysec" help:"when the journal is fsynced: always, everysec or no (as Redis appendfsync)"`
	JournalMaxBytes int64             `env:"COUNTERD_JOURNAL_MAX_BYTES" envDefault:"1073741824" help:"refuse increments (-BUSY) past this many bytes of unflushed journal"`
	Ack             string            `env:"COUNTERD_ACK" envDefault:"journal" help:"reply to increments once journaled (journal) or once committed in PostgreSQL (commit)"`

	FlushInterval time.Duration `env:"COUNTERD_FLUSH_INTERVAL" envDefault:"100ms" help:"cut a round of coalesced increments this often while PostgreSQL keeps up"`
	// 1s: ten default rounds' worth of coalescing when PostgreSQL is the
	// bottleneck, while SQL readers still see an increment within a second
	// (GET reads pending increments anyway).
	FlushIntervalMax time.Duration `env:"COUNTERD_FLUSH_INTERVAL_MAX" envDefault:"1s" help:"longest a round accumulates: rounds grow up to this while PostgreSQL is busy writing them; at or below COUNTERD_FLUSH_INTERVAL rounds are fixed"`
	// 10 a second: one daemon alone keeps COUNTERD_FLUSH_INTERVAL's 100 ms
	// rounds, and a fleet of n writes as many transactions and rows of a
	// popular key a second as that one daemon (docs/operations.md,
	// Running a fleet).
	FleetRounds float64 `env:"COUNTERD_FLEET_ROUNDS" envDefault:"10" help:"rounds per second the whole fleet of daemons on one database aims at: with n live daemons (from their heartbeats) each cuts a round at most every n/this seconds, so PostgreSQL's work per increment does not grow with n; 0 turns the rule off"`
	// 10s: the longest staleness of counter_totals a fleet rule may cause
	// (GET and FLUSH see no staleness: GET adds pending increments, a
	// waiter cuts the round at once).
	FleetIntervalMax time.Duration `env:"COUNTERD_FLEET_INTERVAL_MAX" envDefault:"10s" help:"longest round the fleet rule may choose: how stale counter_totals may be in a large fleet"`
	// 100,000 rather than a smaller cap: a cap that cuts rounds before the
	// flush interval does keeps the adaptive interval from growing them,
	// and unpipelined loads over many keys then coalesce almost nothing
	// (measured: 10,000 gave 0.95 slot rows per INCR at -P 1 and 1.26×
	// less committed than 100,000; docs/performance.md).
	FlushMaxKeys   int           `env:"COUNTERD_FLUSH_MAX_KEYS" envDefault:"100000" help:"flush early once this many distinct keys are pending"`
	FlushTimeout   time.Duration `env:"COUNTERD_FLUSH_TIMEOUT" envDefault:"10s" help:"how long FLUSH and GET wait for PostgreSQL before replying -ERR"`
	MaxPendingKeys int           `env:"COUNTERD_MAX_PENDING_KEYS" envDefault:"1000000" help:"refuse new keys (-BUSY, back off and retry) past this many unflushed keys"`

	// 30s: a paced round takes well under a second; the allowance per
	// change and the doubling fit the deadline to a backlog's round.
	RoundTimeout time.Duration `env:"COUNTERD_ROUND_TIMEOUT" envDefault:"30s" help:"deadline of one attempt to write a round, plus 100µs per change of the round; doubled after each attempt of the round that ran out of it, up to 8 times the first"`

	// A post liked 1000 times a second is far beyond what coalescing
	// needs help with on one daemon, but it is where one key's slot rows
	// start to carry real write load across a fleet.
	HotRate float64 `env:"COUNTERD_HOT_RATE" envDefault:"1000" help:"a key is hot above this many increments per second"`
	// Empty by default: counts are exact unless an operator names the
	// keys (page views, say) for which an estimate is good enough.
	SampleKeys string `env:"COUNTERD_SAMPLE_KEYS" help:"comma-separated glob patterns (* and ?) of keys whose increments are sampled while hot, as view:*,*:views; empty: never sample"`
	// Empty by default: a counter lives until DEL or EXPIRE says otherwise.
	KeyTTL    string  `env:"COUNTERD_KEY_TTL" help:"default idle retention by key pattern, as session:*=1d;tmp:*=1h: a matching key expires that long after the last round that wrote it (an explicit EXPIRE wins until it passes); empty: none"`
	HotTarget float64 `env:"COUNTERD_HOT_TARGET" envDefault:"100" help:"while hot, aim for this many recorded increments per second per key"`
	HotMaxN   int     `env:"COUNTERD_HOT_MAX_N" envDefault:"1000" help:"largest sampling factor N"`

	// Empty by default: windows cost a bucket row per width per key and
	// round, so an operator names the keys that need them.
	Windows string `env:"COUNTERD_WINDOWS" help:"time windows by key pattern: pattern=width:retention[,...] rules separated by ;, as post:*=minute:2h,hour:14d,day:400d;view:*=hour:2d (widths minute, hour, day; first matching pattern wins); empty: none"`
	// Only tests set it: it pins the accept clock, so a test can assert
	// which bucket an increment lands in without sleeping to a boundary.
	TestClock time.Time `env:"COUNTERD_TEST_CLOCK" help:"for tests only: RFC 3339 time the accept clock (which picks time buckets) starts at; empty: the host's clock"`

	// 30s: renewed every 10s, so a daemon survives a database blip of
	// well over 10s with its leases, while a crashed daemon's unused
	// units come back into play (as forfeited, never re-granted) within
	// half a minute.
	LeaseTTL time.Duration `env:"COUNTERD_LEASE_TTL" envDefault:"30s" help:"budget leases (TAKE) live this long unless renewed (every third of it); a daemon stops granting from a lease it could not renew in time, and others forfeit it after the TTL"`

	// 30s, like COUNTERD_LEASE_TTL, and never shorter: a daemon whose
	// instance is taken over has stopped granting from its budget leases
	// by then (every renewal is also a heartbeat).
	OwnerTTL time.Duration `env:"COUNTERD_OWNER_TTL" envDefault:"30s" help:"the journal's instance is claimed in PostgreSQL and heartbeated every third of this; another daemon on a copy of the journal is refused while the heartbeat is younger, and may take the instance over once it is older"`

	Slots      int `env:"COUNTERD_SLOTS" envDefault:"16" help:"slot rows one key may spread over"`
	Writers    int `env:"COUNTERD_WRITERS" envDefault:"2" help:"most transactions one flush round is split into (one per 2,000 keys), written at once (1..16); a round is split only while PostgreSQL is behind or a client waits on it (FLUSH, COUNTERD_ACK=commit)"`
	DBMaxConns int `env:"COUNTERD_DB_MAX_CONNS" envDefault:"8" help:"PostgreSQL connections in the pool (in each partition's pool with COUNTERD_CLUSTER)"`
	// Cluster names a PL/Proxy cluster the operator declared in the
	// DATABASE_URL database (docs/scaling.md).
	Cluster string `env:"COUNTERD_CLUSTER" help:"PL/Proxy cluster to run on: a foreign server (CREATE SERVER name FOREIGN DATA WRAPPER plproxy) in the DATABASE_URL database; each key's rows go to partition hashtext(key) & (n-1); empty: DATABASE_URL alone"`
	// 30s is far beyond any flush or read the daemon makes (a 10k-key
	// round takes well under a second) yet ends a statement stuck on the
	// server long before anyone would restart the daemon by hand.
	StatementTimeout time.Duration `env:"COUNTERD_STATEMENT_TIMEOUT" envDefault:"30s" help:"statement_timeout of every database connection (0 keeps the server's; a setting in DATABASE_URL wins)"`
	// Writers lock slot rows for milliseconds; 5s of waiting for a lock
	// means something else (a migration, a manual LOCK) holds the table,
	// and failing lets the flusher retry instead of queueing behind it.
	LockTimeout time.Duration `env:"COUNTERD_LOCK_TIMEOUT" envDefault:"5s" help:"lock_timeout of every database connection (0 keeps the server's; a setting in DATABASE_URL wins)"`

	// 10,000 is Redis's maxclients default. An idle connection costs a
	// goroutine, a file descriptor and a few KiB of buffers; the limit
	// keeps a leaking client from exhausting descriptors (which stops
	// accept for everyone) or memory, far above what one app host needs.
	MaxConns int `env:"COUNTERD_MAX_CONNS" envDefault:"10000" help:"most client connections; past it a new one gets -ERR max number of clients reached and is closed"`

	// Empty means no password, as a Redis default user without one.
	Password string `env:"COUNTERD_PASSWORD" help:"when set, clients must AUTH (or HELLO ... AUTH default <password>) before other commands (never logged)"`

	// Redis's client-output-buffer-limit for normal clients is unlimited;
	// a bound is safer. counterd stops reading a connection while half of
	// it is unsent, so a client that reads gets near it only with one
	// enormous reply (MGET of a huge key list).
	// 1 MiB: far above any command counterd serves (an MGET of
	// thousands of keys), so that a client streaming an endless command
	// costs little. Redis's client-query-buffer-limit is 1 GiB, for
	// values counterd does not store.
	ClientQueryLimit  int `env:"COUNTERD_CLIENT_QUERY_BUFFER_LIMIT" envDefault:"1048576" help:"most bytes one command may take, and so the most a connection's read buffer holds; past it the client gets -ERR Protocol error: too big request and is disconnected (65536..1073741824). Before AUTH, with COUNTERD_PASSWORD set, a command may take 32 KiB (10 arguments of 16 KiB at most)"`
	ClientOutputLimit int `env:"COUNTERD_CLIENT_OUTPUT_LIMIT" envDefault:"67108864" help:"most reply bytes pending for one connection; past it the connection is closed (at least 1048576)"`
	// 30s: far longer than any healthy client takes to read, short
	// enough that a stuck one does not hold a connection slot for long.
	ClientWriteTimeout time.Duration `env:"COUNTERD_CLIENT_WRITE_TIMEOUT" envDefault:"30s" help:"a client that does not take its pending replies within this long is disconnected"`
	IO                 string        `env:"COUNTERD_IO" defaultDoc:"loop (Linux), else goroutines" help:"how connections are served: loop (event loops, one journal write per loop pass; Linux only) or goroutines (one per connection)"`
	Loops              int           `env:"COUNTERD_LOOPS" envDefault:"0" help:"event loops with COUNTERD_IO=loop (0: half of the cores, at least 1)"`
	ShutdownTimeout    time.Duration `env:"COUNTERD_SHUTDOWN_TIMEOUT" envDefault:"30s" help:"on SIGTERM, how long connections may take to answer what they already sent (then they are closed), and then how long to keep retrying the final flush"`
	LogLevel           slog.Level    `env:"COUNTERD_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	LogFormat          string        `env:"COUNTERD_LOG_FORMAT" envDefault:"text" help:"text or json"`
}

// resolve fills the socket path and the I/O mode when COUNTERD_SOCKET or
// COUNTERD_IO is empty: neither has a static default (the I/O mode's
// depends on the system).
func (c *Counterd) resolve(env map[string]string) {
	if c.Socket == "" {
		c.Socket = DefaultSocket(env, os.Geteuid())
		c.SocketSource = "COUNTERD_SOCKET (unset, so " + c.Socket + " by its rule"
		if d := env["XDG_RUNTIME_DIR"]; filepath.IsAbs(d) {
			c.SocketSource += " from XDG_RUNTIME_DIR=" + d
		}
		c.SocketSource += ")"
	}
	if c.IO == "" {
		c.IO = defaultIO()
	}
}

// defaultIO is COUNTERD_IO's default on this system: the event loops
// where there are any (EventLoops), else a goroutine per connection.
func defaultIO() string {
	if EventLoops {
		return "loop"
	}
	return "goroutines"
}

// Validate checks ranges env cannot express: the first rule broken, in
// the order of rules, then the settings with a grammar of their own.
func (c *Counterd) Validate() error {
	for _, r := range c.rules() {
		if r.broken {
			return &Error{r.name, r.msg}
		}
	}
	if _, err := glob.Parse(c.SampleKeys); err != nil {
		return &Error{"COUNTERD_SAMPLE_KEYS", err.Error()}
	}
	if _, err := windows.Parse(c.Windows); err != nil {
		return &Error{"COUNTERD_WINDOWS", err.Error()}
	}
	if _, err := retention.Parse(c.KeyTTL); err != nil {
		return &Error{"COUNTERD_KEY_TTL", err.Error()}
	}
	return validLogFormat("COUNTERD_LOG_FORMAT", c.LogFormat)
}

// rule is one check of a setting: broken says the value is out of range,
// and msg says what the variable must be.
type rule struct {
	name   string
	broken bool
	msg    string
}

// rules lists Counterd's range checks in the order Validate reports
// them. Each condition says what is wrong, so that a value no comparison
// holds for (a NaN rate) passes exactly as it always has.
func (c *Counterd) rules() []rule {
	return []rule{
		{"COUNTERD_SOCKET", len(c.Socket) > 107, "path longer than the 107 bytes a Unix socket allows"},
		{"COUNTERD_IO", !oneOf(c.IO, "goroutines", "loop"), fmt.Sprintf("%q is not goroutines or loop", c.IO)},
		{"COUNTERD_IO", c.IO == "loop" && !EventLoops, "loop needs epoll, which only Linux has; use goroutines"},
		{"COUNTERD_LOOPS", outside(c.Loops, 0, 256), "must be 0..256"},
		{"COUNTERD_ACK", !oneOf(c.Ack, "journal", "commit"), fmt.Sprintf("%q is not journal or commit", c.Ack)},
		{"COUNTERD_JOURNAL_MAX_BYTES", c.JournalMaxBytes < 1<<20, "must be at least 1048576 (1 MiB)"},
		{"COUNTERD_FLUSH_INTERVAL", c.FlushInterval <= 0, "must be positive"},
		{"COUNTERD_FLEET_ROUNDS", c.FleetRounds < 0, "must not be negative (0 turns the fleet rule off)"},
		{"COUNTERD_FLEET_INTERVAL_MAX", c.FleetIntervalMax < 0, "must not be negative"},
		{"COUNTERD_FLUSH_MAX_KEYS", c.FlushMaxKeys < 1, "must be at least 1"},
		{"COUNTERD_FLUSH_TIMEOUT", c.FlushTimeout <= 0, "must be positive"},
		{"COUNTERD_ROUND_TIMEOUT", c.RoundTimeout <= 0, "must be positive"},
		{"COUNTERD_MAX_PENDING_KEYS", c.MaxPendingKeys < 1, "must be at least 1"},
		{"COUNTERD_HOT_RATE", c.HotRate <= 0, "must be positive"},
		{"COUNTERD_HOT_TARGET", c.HotTarget <= 0, "must be positive"},
		{"COUNTERD_HOT_MAX_N", c.HotMaxN < 1, "must be at least 1"},
		{"COUNTERD_SLOTS", outside(c.Slots, 1, 32767), "must be 1..32767"},
		{"COUNTERD_WRITERS", outside(c.Writers, 1, 16), "must be 1..16"},
		{"COUNTERD_DB_MAX_CONNS", c.DBMaxConns <= c.Writers, "must exceed COUNTERD_WRITERS, so reads get a connection while a round is written"},
		{"COUNTERD_MAX_CONNS", c.MaxConns < 1, "must be at least 1"},
		{"COUNTERD_CLIENT_QUERY_BUFFER_LIMIT", outside(c.ClientQueryLimit, 64<<10, 1<<30), "must be 65536..1073741824 (64 KiB to 1 GiB)"},
		{"COUNTERD_CLIENT_OUTPUT_LIMIT", c.ClientOutputLimit < 1<<20, "must be at least 1048576 (1 MiB)"},
		{"COUNTERD_CLIENT_WRITE_TIMEOUT", c.ClientWriteTimeout <= 0, "must be positive"},
		{"COUNTERD_LEASE_TTL", c.LeaseTTL < 300*time.Millisecond, "must be at least 300ms"},
		{"COUNTERD_OWNER_TTL", c.OwnerTTL < c.LeaseTTL, "must be at least COUNTERD_LEASE_TTL"},
		{"COUNTERD_SHUTDOWN_TIMEOUT", c.ShutdownTimeout <= 0, "must be positive"},
		{"COUNTERD_STATEMENT_TIMEOUT", c.StatementTimeout < 0, "must not be negative"},
		{"COUNTERD_LOCK_TIMEOUT", c.LockTimeout < 0, "must not be negative"},
		{"COUNTERD_CLUSTER", c.Cluster != "" && !identifier(c.Cluster), fmt.Sprintf("%q is not a PL/Proxy cluster name (lower-case letters, digits and _, not starting with a digit)", c.Cluster)},
	}
}

// identifier says name is a plain lower-case SQL identifier, as a
// PL/Proxy cluster's name is written in CLUSTER 'name'.
func identifier(name string) bool {
	if len(name) == 0 || len(name) > 63 || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// outside says v is not in lo..hi.
func outside(v, lo, hi int) bool { return v < lo || v > hi }

// oneOf says v is one of the values a setting takes.
func oneOf(v string, values ...string) bool { return slices.Contains(values, v) }

func validLogFormat(name, f string) error {
	if f != "text" && f != "json" {
		return &Error{name, fmt.Sprintf("%q is not text or json", f)}
	}
	return nil
}
